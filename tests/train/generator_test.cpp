// Decoding with a key/value cache gives the logits of the whole-window
// forward at every position: the cache, the right-aligned mask, rope at
// the token's position and the position table's row are all checked
// against the graph that training evaluates. Also past the context, where
// the window restarts from its newest half.
#include "train/generator.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "exec/executor.hpp"
#include "model/model_parser.hpp"
#include "reference_device.hpp"
#include "train/initializers.hpp"

namespace tandem::test {
namespace {

namespace lowering = host::lowering;

const char* kModel = R"([model]
task = "language_model"
context = 6
vocab_size = 256
[[layers]]
name = "tok"
op = "embedding"
num_embeddings = 256
embedding_dim = 8
init_std = 0.5
[[layers]]
name = "pos"
op = "position_embedding"
init_std = 0.5
[[layers]]
name = "h"
op = "repeat"
count = 2
[[layers.body]]
name = "norm"
op = "rms_norm"
[[layers.body]]
name = "attn"
op = "attention"
heads = 4
kv_heads = 2
rope = true
init_std = 0.3
[[layers.body]]
name = "res"
op = "add"
inputs = ["h", "attn"]
[[layers]]
name = "head"
op = "linear"
out_features = 256
tie_weight = "tok"
bias = false
)";

class Decoding : public ReferenceDevice {
 protected:
  virtual std::string model_text() const { return kModel; }
  void SetUp() override {
    ReferenceDevice::SetUp();
    auto spec = host::model::parse_model_text(model_text(), "lm.toml");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    spec_ = *spec;
    // Random parameters, as a checkpoint both graphs read.
    auto m = lowering::build_forward(spec_, 1, lowering::Mode::Eval);
    ASSERT_TRUE(m.ok()) << m.error().message;
    std::mt19937_64 rng(3);
    std::normal_distribution<float> normal(0.f, 0.4f);
    for (ParameterShape p : parameters(*m)) {
      host::checkpoint::TensorRecord t{p.name, TDM_F32, p.dims, {}};
      std::vector<float> values(size_t(p.numel));
      for (float& v : values) v = normal(rng);
      t.data.resize(values.size() * sizeof(float));
      std::memcpy(t.data.data(), values.data(), t.data.size());
      checkpoint_.tensors.push_back(std::move(t));
    }
  }

  struct ParameterShape {
    std::string name;
    std::vector<int64_t> dims;
    int64_t numel;
  };
  static std::vector<ParameterShape> parameters(const lowering::ModelGraph& m) {
    std::vector<ParameterShape> out;
    for (host::ValueId id : m.parameters) {
      const auto& v = *m.graph.value(id);
      int64_t n = 1;
      for (int64_t d : v.type.dims) n *= d;
      out.push_back({v.name, v.type.dims, n});
    }
    return out;
  }

  // The logits [T, 256] of the whole-window forward over `tokens` (T = context).
  std::vector<float> window_logits(const std::vector<int32_t>& tokens) {
    auto m = lowering::build_forward(spec_, 1, lowering::Mode::Eval);
    EXPECT_TRUE(m.ok());
    host::exec::ExecutorOptions options;
    options.outputs = {"loss", m->graph.value(m->logits)->name};
    auto ex = host::exec::Executor::create(*device_, m->graph, options);
    EXPECT_TRUE(ex.ok()) << ex.error().message;
    for (const auto& t : checkpoint_.tensors)
      EXPECT_TRUE((*ex)->write(m->graph.value_by_name(t.name)->id, t.data.data(), t.data.size()).ok());
    std::vector<int32_t> labels(tokens.size(), 0);
    EXPECT_TRUE((*ex)->write(m->input, tokens.data(), tokens.size() * 4).ok());
    EXPECT_TRUE((*ex)->write(m->labels, labels.data(), labels.size() * 4).ok());
    auto ran = (*ex)->run();
    EXPECT_TRUE(ran.ok()) << ran.error().message;
    std::vector<float> logits(tokens.size() * 256);
    EXPECT_TRUE((*ex)->read(m->logits, logits.data(), logits.size() * 4).ok());
    return logits;
  }

  // Decoding `tokens` one at a time gives, at each, the window's logits there.
  void expect_steps_as_window(const std::vector<int32_t>& tokens) {
    auto gen = host::train::Generator::create(spec_, *device_, *registry_, checkpoint_, "random", nullptr);
    ASSERT_TRUE(gen.ok()) << gen.error().message;
    const std::vector<float> whole = window_logits(tokens);
    for (size_t t = 0; t < tokens.size(); ++t) {
      auto logits = (*gen)->step(tokens[t]);
      ASSERT_TRUE(logits.ok()) << logits.error().message;
      for (size_t v = 0; v < 256; ++v)
        ASSERT_NEAR((**logits)[v], whole[t * 256 + v], 2e-5) << "position " << t << " token " << v;
    }
  }

  host::model::ModelSpec spec_;
  host::checkpoint::Checkpoint checkpoint_;
};

TEST_F(Decoding, EachTokensLogitsEqualTheWholeWindowsForward) {
  expect_steps_as_window({72, 101, 108, 108, 111, 33});
}

// Llama 3.1's rope scaling reaches the rope of decoding too (an original
// context of 4: each head's one pair turns 8 times slower).
class ScaledRopeDecoding : public Decoding {
 protected:
  std::string model_text() const override {
    std::string text = kModel;
    return text.replace(
        text.find("rope = true"), 11,
        "rope = true\nrope_scaling = \"llama3\"\nrope_factor = 8.0\nrope_original_context = 4");
  }
};

TEST_F(ScaledRopeDecoding, EachTokensLogitsEqualTheWholeWindowsForward) {
  const std::vector<int32_t> tokens = {9, 201, 18, 7, 111, 3};
  expect_steps_as_window(tokens);
  const std::vector<float> whole = window_logits(tokens);
  // The scaling changes the model: unscaled, the same weights differ.
  auto plain = host::model::parse_model_text(kModel, "lm.toml");
  ASSERT_TRUE(plain.ok());
  std::swap(spec_, *plain);
  const std::vector<float> unscaled = window_logits(tokens);
  double largest = 0;
  for (size_t i = 0; i < whole.size(); ++i)
    largest = std::max(largest, double(std::fabs(whole[i] - unscaled[i])));
  EXPECT_GT(largest, 1e-3);
}

TEST(RopeScaling, ItsSettingsAreCheckedNamingTheLayer) {
  const std::pair<const char*, const char*> bad[] = {
      {"rope = false\nrope_scaling = \"llama3\"", "rope_scaling needs rope = true"},
      {"rope = true\nrope_factor = 4.0", "rope_factor applies to rope_scaling = \"llama3\" only"},
      {"rope = true\nrope_scaling = \"llama3\"\nrope_low_freq_factor = 4.0\nrope_high_freq_factor = 2.0",
       "needs rope_high_freq_factor above rope_low_freq_factor"},
  };
  for (const auto& [settings, message] : bad) {
    std::string text = kModel;
    text.replace(text.find("rope = true"), 11, settings);
    auto spec = host::model::parse_model_text(text, "lm.toml");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    auto m = lowering::build_forward(*spec, 1, lowering::Mode::Eval);
    ASSERT_FALSE(m.ok()) << settings;
    EXPECT_NE(m.error().message.find(message), std::string::npos) << m.error().message;
    EXPECT_NE(m.error().message.find("attn"), std::string::npos) << m.error().message;
  }
  std::string scaled = kModel;
  scaled.replace(scaled.find("rope = true"), 11, "rope = true\nrope_scaling = \"llama3\"");
  auto spec = host::model::parse_model_text(scaled, "lm.toml");
  ASSERT_TRUE(spec.ok());
  auto old = lowering::check_backend_for(*spec, "old", lowering::kRopeScalingMinor - 1, false);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.error().message.find("update the plugin"), std::string::npos) << old.error().message;
  EXPECT_TRUE(lowering::check_backend_for(*spec, "new", lowering::kRopeScalingMinor, false).ok());
}

// Past the context the window restarts from its newest half (3 tokens): the
// logits are those of a forward over that half and the tokens after it.
TEST_F(Decoding, PastTheContextTheWindowRestartsFromItsNewestHalf) {
  auto gen = host::train::Generator::create(spec_, *device_, *registry_, checkpoint_, "random", nullptr);
  ASSERT_TRUE(gen.ok()) << gen.error().message;
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  for (size_t t = 0; t < 6; ++t) ASSERT_TRUE((*gen)->step(tokens[t]).ok());
  const std::vector<float> whole = window_logits({4, 5, 6, 7, 8, 0});
  auto seventh = (*gen)->step(7);
  ASSERT_TRUE(seventh.ok()) << seventh.error().message;
  for (size_t v = 0; v < 256; ++v) ASSERT_NEAR((**seventh)[v], whole[3 * 256 + v], 2e-5) << v;
  auto eighth = (*gen)->step(8);
  ASSERT_TRUE(eighth.ok());
  for (size_t v = 0; v < 256; ++v) ASSERT_NEAR((**eighth)[v], whole[4 * 256 + v], 2e-5) << v;
}

TEST_F(Decoding, TheSameSeedGivesTheSameTextAndGreedyIsTheArgmax) {
  auto run = [&](uint64_t seed, double temperature) {
    auto gen = host::train::Generator::create(spec_, *device_, *registry_, checkpoint_, "random", nullptr);
    EXPECT_TRUE(gen.ok());
    std::vector<int32_t> out;
    EXPECT_TRUE(
        (*gen)->generate({65, 66}, 12, {temperature, 5, seed}, [&](int32_t t) { out.push_back(t); }).ok());
    return out;
  };
  EXPECT_EQ(run(7, 1.0), run(7, 1.0));
  EXPECT_NE(run(7, 1.0), run(8, 1.0));
  EXPECT_EQ(run(1, 0.0), run(2, 0.0)) << "temperature 0 draws nothing";
  auto gen = host::train::Generator::create(spec_, *device_, *registry_, checkpoint_, "random", nullptr);
  ASSERT_TRUE(gen.ok());
  auto logits = (*gen)->step(65);
  ASSERT_TRUE(logits.ok());
  const auto best = std::max_element((*logits)->begin(), (*logits)->end()) - (*logits)->begin();
  auto again = host::train::Generator::create(spec_, *device_, *registry_, checkpoint_, "random", nullptr);
  std::vector<int32_t> first;
  ASSERT_TRUE((*again)->generate({65}, 1, {0.0, 0, 0}, [&](int32_t t) { first.push_back(t); }).ok());
  EXPECT_EQ(first.at(0), best);
}

}  // namespace
}  // namespace tandem::test
