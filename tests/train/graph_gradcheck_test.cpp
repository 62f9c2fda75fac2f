// Whole-graph gradient checks: the backward graph autodiff builds for a
// model file, run on the reference backend in f64, against central finite
// differences of the loss with respect to every parameter.
//
// Tolerance: in f64 with h = 1e-6 the truncation error is O(h^2 f''') ~ 1e-12
// and the rounding error ~ 1e-16 / h ~ 1e-10 relative, so 1e-6 relative (plus
// 1e-8 absolute) leaves room for the loss's curvature yet catches any wrong
// rule (a wrong transpose or a missing term is off by O(1)).
#include <cmath>
#include <random>

#include "exec/executor.hpp"
#include "lowering/autodiff.hpp"
#include "model/model_parser.hpp"
#include "ops/op_table.hpp"
#include "reference_device.hpp"
#include "train/initializers.hpp"

namespace tandem::test {
namespace {

using host::Node;
using host::ValueId;
namespace lowering = host::lowering;

const char* kMlp = R"([model]
input = [6]
classes = 3
[[layers]]
name = "fc1"
op = "linear"
out_features = 5
activation = "relu"
[[layers]]
name = "fc2"
op = "linear"
out_features = 4
activation = "tanh"
[[layers]]
name = "act"
op = "sigmoid"
[[layers]]
name = "fc3"
op = "linear"
out_features = 3
[loss]
label_smoothing = 0.1
)";

const char* kCnn = R"([model]
input = [2, 7, 7]
classes = 3
[[layers]]
name = "conv1"
op = "conv2d"
out_channels = 4
kernel = 3
padding = 1
stride = 1
[[layers]]
name = "relu1"
op = "relu"
[[layers]]
name = "pool1"
op = "max_pool2d"
kernel = 2
[[layers]]
name = "conv2"
op = "conv2d"
out_channels = 4
kernel = 2
groups = 2
[[layers]]
name = "pool2"
op = "avg_pool2d"
kernel = 2
[[layers]]
name = "bn"
op = "batch_norm"
[[layers]]
name = "fc"
op = "linear"
out_features = 3
)";

const char* kResidual = R"([model]
input = [5]
classes = 2
[[layers]]
name = "stem"
op = "linear"
out_features = 6
[[layers]]
name = "branch1"
op = "linear"
out_features = 6
activation = "relu"
[[layers]]
name = "branch2"
op = "linear"
out_features = 6
[[layers]]
name = "skip"
op = "add"
inputs = ["stem", "branch2"]
[[layers]]
name = "gate"
op = "mul"
inputs = ["skip", "stem"]
[[layers]]
name = "leaky"
op = "leaky_relu"
negative_slope = 0.2
[[layers]]
name = "act"
op = "gelu"
[[layers]]
name = "head"
op = "linear"
out_features = 2
)";

const char* kEmbedding = R"([model]
input = [4]
classes = 3
[[layers]]
name = "embed"
op = "embedding"
num_embeddings = 7
embedding_dim = 5
[[layers]]
name = "norm"
op = "layer_norm"
[[layers]]
name = "head"
op = "linear"
out_features = 3
)";

// A small Llama-style language model: token and position embeddings, two
// repeated blocks of rms_norm, causal attention with grouped heads and
// rotary embeddings, a SiLU MLP, residuals, and an output head tied to the
// token embedding (its gradient sums both uses).
const char* kLanguageModel = R"([model]
task = "language_model"
context = 5
vocab_size = 11
[[layers]]
name = "tok"
op = "embedding"
num_embeddings = 11
embedding_dim = 8
[[layers]]
name = "pos"
op = "position_embedding"
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
[[layers.body]]
name = "res1"
op = "add"
inputs = ["h", "attn"]
[[layers.body]]
name = "up"
op = "linear"
out_features = 12
[[layers.body]]
name = "act"
op = "silu"
[[layers.body]]
name = "down"
op = "linear"
out_features = 8
[[layers.body]]
name = "res2"
op = "add"
inputs = ["res1", "down"]
[[layers]]
name = "final"
op = "layer_norm"
[[layers]]
name = "head"
op = "linear"
out_features = 11
bias = false
tie_weight = "tok"
)";

class GraphGradcheck : public ReferenceDevice {
 protected:
  // backend_abi_minor: as lowering::build_forward's (0: every backend).
  void check(const char* text, bool integer_inputs = false, uint32_t backend_abi_minor = 0) {
    auto spec = host::model::parse_model_text(text, "gradcheck.toml");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    const int64_t batch = 3;
    auto m =
        lowering::build_forward(*spec, batch, lowering::Mode::Train, TDM_F64, {}, nullptr, backend_abi_minor);
    ASSERT_TRUE(m.ok()) << m.error().message;
    ASSERT_TRUE(lowering::append_backward(*m).ok());
    host::exec::ExecutorOptions options;
    options.outputs = {"loss"};
    auto ex = host::exec::Executor::create(*device_, m->graph, options);
    ASSERT_TRUE(ex.ok()) << ex.error().message;
    host::exec::Executor& e = **ex;

    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> uni(-1, 1);
    const auto& in_dims = m->graph.value(m->input)->type.dims;
    int64_t n_in = 1;
    for (int64_t d : in_dims) n_in *= d;
    std::vector<double> input(static_cast<size_t>(n_in));
    for (auto& x : input) x = integer_inputs ? double(rng() % 7) : uni(rng);
    // A language model reads token ids and has a label per position.
    const bool tokens = spec->language_model();
    std::vector<int32_t> ids(static_cast<size_t>(n_in));
    for (auto& t : ids) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(spec->classes));
    std::vector<int32_t> labels(static_cast<size_t>(tokens ? n_in : batch));
    for (auto& l : labels) l = static_cast<int32_t>(rng() % static_cast<uint64_t>(spec->classes));
    ASSERT_TRUE((tokens ? e.write(m->input, ids.data(), ids.size() * 4)
                        : e.write(m->input, input.data(), input.size() * 8))
                    .ok());
    ASSERT_TRUE(e.write(m->labels, labels.data(), labels.size() * 4).ok());
    std::map<ValueId, std::vector<double>> params;
    for (const auto& [id, init] : m->initializers) {
      const auto& v = *m->graph.value(id);
      int64_t n = 1;
      for (int64_t d : v.type.dims) n *= d;
      auto f = host::train::initial_values(init, v.name, n, 3);
      std::vector<double> values(f.begin(), f.end());
      for (auto& x : values) x += 0.1 * uni(rng);  // break symmetry (zero biases, unit gammas)
      if (v.kind == TDM_VALUE_STATE)
        for (auto& x : values) x = std::abs(x) + 0.5;  // running var > 0
      ASSERT_TRUE(e.write(id, values.data(), values.size() * 8).ok());
      if (v.kind == TDM_VALUE_PARAMETER) params[id] = values;
    }
    {
      auto ran = e.run();
      ASSERT_TRUE(ran.ok()) << ran.error().message;
    }
    std::map<ValueId, std::vector<double>> grads;
    for (auto& [p, values] : params) {
      grads[p].resize(values.size());
      ASSERT_TRUE(e.read(m->gradients.at(p), grads[p].data(), values.size() * 8).ok());
    }
    auto loss_at = [&](ValueId p, size_t i, double x) {
      std::vector<double> v = params[p];
      v[i] = x;
      EXPECT_TRUE(e.write(p, v.data(), v.size() * 8).ok());
      EXPECT_TRUE(e.run(0, m->backward_begin).ok());
      double loss = 0;
      EXPECT_TRUE(e.read(m->loss, &loss, 8).ok());
      return loss;
    };
    for (auto& [p, values] : params) {
      const std::string name = m->graph.value(p)->name;
      for (size_t k = 0; k < std::min<size_t>(values.size(), 8); ++k) {
        const size_t i = (k * 7919) % values.size();
        const double h = 1e-6 * (std::abs(values[i]) + 1);
        const double numeric = (loss_at(p, i, values[i] + h) - loss_at(p, i, values[i] - h)) / (2 * h);
        EXPECT_NEAR(grads[p][i], numeric, 1e-6 * std::abs(numeric) + 1e-8) << name << "[" << i << "]";
      }
      ASSERT_TRUE(e.write(p, values.data(), values.size() * 8).ok());
    }
  }
};

TEST_F(GraphGradcheck, MlpWithFusedActivations) {
  check(kMlp);
}
TEST_F(GraphGradcheck, CnnWithPoolingAndBatchNorm) {
  check(kCnn);
}
TEST_F(GraphGradcheck, ResidualBlockWithSharedValues) {
  check(kResidual);
}
TEST_F(GraphGradcheck, EmbeddingAndLayerNorm) {
  check(kEmbedding, true);
}

TEST_F(GraphGradcheck, LanguageModelWithAttentionRepeatAndTiedHead) {
  check(kLanguageModel);
}

// The language model without rope, whose attention reads q, k and v as
// the projections lay them out when the backends speak ABI 1.8 (layout
// "bthd", no transposes).
std::string language_model_without_rope() {
  std::string text = kLanguageModel;
  text.erase(text.find("rope = true\n"), std::string("rope = true\n").size());
  return text;
}

TEST_F(GraphGradcheck, LanguageModelWithAttentionOnTokenRows) {
  check(language_model_without_rope().c_str(), false, lowering::kAttentionLayoutMinor);
}

// The same with the gradient sums of the residual stream and of q, k and v's
// shared input added by linear_grad_input and layer_norm_grad themselves
// (their addend, ABI 1.9) rather than by `add` nodes.
TEST_F(GraphGradcheck, LanguageModelWithGradientAddends) {
  check(language_model_without_rope().c_str(), false, lowering::kGradientAddendMinor);
}

// Backends of ABI 1.9 get every gradient sum they can take as an addend
// (one `add` fewer for each); older ones get the adds.
TEST(GradientAddends, OnlyForBackendsThatTakeThem) {
  auto spec = host::model::parse_model_text(language_model_without_rope(), "lm.toml");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  std::map<uint32_t, std::pair<size_t, size_t>> adds_and_addends;
  for (uint32_t minor : {lowering::kGradientAddendMinor - 1, lowering::kGradientAddendMinor}) {
    auto m = lowering::build_forward(*spec, 2, lowering::Mode::Train, TDM_F32, {}, nullptr, minor);
    ASSERT_TRUE(m.ok()) << m.error().message;
    ASSERT_TRUE(lowering::append_backward(*m).ok());
    auto& [adds, addends] = adds_and_addends[minor];
    for (size_t i = m->backward_begin; i < m->graph.node_count(); ++i) {
      const Node& n = *m->graph.node_at(i);
      adds += n.op == "add";
      if (n.op == "linear_grad_input") addends += n.inputs.size() > 2 && n.inputs[2] != host::kNoValue;
      if (n.op == "layer_norm_grad") addends += n.inputs.size() > 5 && n.inputs[5] != host::kNoValue;
      if (n.op == "rms_norm_grad") addends += n.inputs.size() > 4 && n.inputs[4] != host::kNoValue;
    }
  }
  const auto [old_adds, old_addends] = adds_and_addends[lowering::kGradientAddendMinor - 1];
  const auto [adds, addends] = adds_and_addends[lowering::kGradientAddendMinor];
  EXPECT_EQ(old_addends, 0u);
  // Per block: k's and v's input gradients onto q's (2), the norm's onto
  // the block input's (1); 2 blocks. res1 keeps its add: `up` reads it
  // through a reshape, whose gradient is the one summed.
  EXPECT_EQ(addends, 6u);
  EXPECT_EQ(old_adds - adds, addends);
}

// Which attention a training graph gets: "bthd" and no transpose for
// backends of ABI 1.8, the transposes around "bhtd" for older ones (which
// would ignore the attribute), and "bhtd" wherever rope reads the heads first.
TEST(AttentionLowering, TransposesOnlyForBackendsOlderThanTheLayoutAttribute) {
  struct Want {
    std::string text;
    uint32_t minor;
    const char* layout;
    size_t transposes;  // 4 forward, 4 backward per layer, 2 layers
  };
  const Want wants[] = {{language_model_without_rope(), lowering::kAttentionLayoutMinor, "bthd", 0},
                        {language_model_without_rope(), lowering::kAttentionLayoutMinor - 1, "bhtd", 16},
                        {kLanguageModel, lowering::kAttentionLayoutMinor, "bhtd", 16}};
  for (const Want& w : wants) {
    auto spec = host::model::parse_model_text(w.text, "lm.toml");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    auto m = lowering::build_forward(*spec, 2, lowering::Mode::Train, TDM_F32, {}, nullptr, w.minor);
    ASSERT_TRUE(m.ok()) << m.error().message;
    ASSERT_TRUE(lowering::append_backward(*m).ok());
    size_t transposes = 0, attention = 0;
    for (size_t i = 0; i < m->graph.node_count(); ++i) {
      const Node& n = *m->graph.node_at(i);
      transposes += n.op == "transpose";
      if (n.op != "attention" && n.op != "attention_grad") continue;
      ++attention;
      EXPECT_EQ(host::ops::string_attr(n.attrs, "layout", "bhtd"), w.layout)
          << n.name << " at minor " << w.minor;
    }
    EXPECT_EQ(attention, 4u) << "minor " << w.minor;
    EXPECT_EQ(transposes, w.transposes) << "minor " << w.minor;
  }
}

}  // namespace
}  // namespace tandem::test
