// `trainable = false`: a frozen layer keeps the weights it started from, has
// no gradient and no optimizer state (and the plan shows the memory saved),
// while the gradient still flows through it to the layers before it. And
// [features.lora], which freezes the whole base and trains adapters, the
// base kept in f32 or in INT8.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <tuple>

#include "checkpoint/safetensors.hpp"
#include "cli_support.hpp"
#include "quant/affine.hpp"
#include "tandem/half.hpp"

namespace tandem::test {
namespace {

class FrozenLayers : public CliTest {
 protected:
  // kSynthetic with AdamW and `extra` lines added after fc<layer>'s op.
  std::string tiny(const std::string& name, int layer, const std::string& extra) {
    std::string text = kSynthetic;
    const std::string op = "name = \"fc" + std::to_string(layer) + "\"\nop = \"linear\"\n";
    text.insert(text.find(op) + op.size(), extra);
    text.replace(text.find("momentum = 0.9"), 14, "optimizer = \"adamw\"");
    return model(text, name);
  }
  // Trains `steps` steps and returns the last checkpoint's tensors.
  host::checkpoint::Checkpoint trained(const std::string& model_file, int steps,
                                       const std::string& set = "") {
    const std::string run = dir.file(std::filesystem::path(model_file).stem().string() + "-run");
    CliRun r = tandem("train " + model_file + " --device reference --run-dir " + run +
                      " --set train.steps=" + std::to_string(steps) + " " + set);
    EXPECT_EQ(r.code, 0) << r.output;
    char file[64];
    std::snprintf(file, sizeof file, "/checkpoints/step-%09d.safetensors", steps);
    auto cp = host::checkpoint::read_safetensors(run + file);
    EXPECT_TRUE(cp.ok()) << (cp.ok() ? "" : cp.error().message);
    return cp.ok() ? *cp : host::checkpoint::Checkpoint{};
  }
  static std::vector<std::byte> bytes(const host::checkpoint::Checkpoint& cp, const std::string& name) {
    const auto* t = cp.find(name);
    EXPECT_NE(t, nullptr) << name;
    return t != nullptr ? t->data : std::vector<std::byte>{};
  }
};

TEST_F(FrozenLayers, KeepTheirWeightsAndHaveNoOptimizerState) {
  // The frozen runs start from this one's weights (--init-from).
  const auto start = trained(tiny("start.toml", 1, ""), 1);
  const std::string from = " --init-from " + dir.file("start-run");
  const auto first_frozen = trained(tiny("first.toml", 1, "trainable = false\n"), 4, from);
  EXPECT_EQ(bytes(first_frozen, "fc1.weight"), bytes(start, "fc1.weight"));
  EXPECT_EQ(bytes(first_frozen, "fc1.bias"), bytes(start, "fc1.bias"));
  EXPECT_NE(bytes(first_frozen, "fc2.weight"), bytes(start, "fc2.weight"));
  for (const auto& t : first_frozen.tensors)
    EXPECT_FALSE(t.name.rfind("optim.", 0) == 0 && t.name.find("fc1") != std::string::npos) << t.name;
  // Frozen last: the gradient reaches fc1 through it.
  const auto last_frozen = trained(tiny("last.toml", 2, "trainable = false\n"), 4, from);
  EXPECT_EQ(bytes(last_frozen, "fc2.weight"), bytes(start, "fc2.weight"));
  EXPECT_NE(bytes(last_frozen, "fc1.weight"), bytes(start, "fc1.weight"));
}

TEST_F(FrozenLayers, LeaveTheOtherLayersFirstStepAsWithoutThem) {
  // One step: fc2's gradient does not depend on whether fc1 trains.
  const auto all = trained(tiny("all.toml", 1, ""), 1);
  const auto frozen = trained(tiny("frozen.toml", 1, "trainable = false\n"), 1);
  EXPECT_EQ(bytes(frozen, "fc2.weight"), bytes(all, "fc2.weight"));
  EXPECT_EQ(bytes(frozen, "fc2.bias"), bytes(all, "fc2.bias"));
}

TEST_F(FrozenLayers, ThePlanShowsThemAndTheirSavedMemory) {
  CliRun all = tandem("plan " + tiny("all.toml", 1, "") + " --device reference");
  CliRun frozen = tandem("plan " + tiny("frozen.toml", 1, "trainable = false\n") + " --device reference");
  ASSERT_EQ(frozen.code, 0) << frozen.output;
  EXPECT_HAS(frozen.output, "(frozen)");
  EXPECT_EQ(all.output.find("(frozen)"), std::string::npos);
  // fc1 holds 8·16 + 16 of the 212 parameters: their gradients and AdamW's
  // two moments of them are gone.
  EXPECT_HAS(all.output, "gradients                  848 B");
  EXPECT_HAS(frozen.output, "gradients                  272 B");
  EXPECT_HAS(all.output, "optimizer state          1.7 KiB");
  EXPECT_HAS(frozen.output, "optimizer state            552 B");
}

TEST_F(FrozenLayers, AllFrozenIsRefused) {
  std::string text = read_file(tiny("one.toml", 1, "trainable = false\n"));
  const std::string fc2 = "name = \"fc2\"\nop = \"linear\"\n";
  text.insert(text.find(fc2) + fc2.size(), "trainable = false\n");
  CliRun r =
      tandem("train " + model(text, "both.toml") + " --device reference --run-dir " + dir.file("both"));
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_HAS(r.output, "nothing to train");
}

TEST_F(FrozenLayers, LoraTrainsItsAdaptersAloneAndNamesATargetThatMatchesNothing) {
  const auto start = trained(tiny("start.toml", 1, ""), 1);
  std::string text = read_file(tiny("lora.toml", 1, ""));
  text += "[features.lora]\nrank = 2\nalpha = 4.0\ntargets = [\"fc2\"]\n";
  const auto tuned = trained(model(text, "lora.toml"), 3, " --init-from " + dir.file("start-run"));
  for (const char* frozen : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"})
    EXPECT_EQ(bytes(tuned, frozen), bytes(start, frozen)) << frozen;
  const auto* a = tuned.find("fc2.lora_A");
  const auto* b = tuned.find("fc2.lora_B");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(b->shape, (std::vector<int64_t>{4, 2}));
  EXPECT_NE(b->data, std::vector<std::byte>(b->data.size()));  // B starts at zero and trained
  for (const auto& t : tuned.tensors) {
    if (t.name.rfind("optim.", 0) != 0 || t.shape.empty()) continue;
    EXPECT_NE(t.name.find(".lora_"), std::string::npos) << t.name << ": optimizer state of a frozen weight";
  }
  std::string typo = text;
  typo.replace(typo.find("[\"fc2\"]"), 7, "[\"fc9\"]");
  CliRun r = tandem("plan " + model(typo, "typo.toml") + " --device reference");
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_HAS(r.output, "\"fc9\" matches no linear layer");
}

// [features.lora] base = "int8": the base's linear weights quantized as
// they load (per row, symmetric, as `tandem quantize`), held as s8 with
// row scales and never changed; only the adapters train.
TEST_F(FrozenLayers, LoraOnAnInt8BaseQuantizesItAsItLoadsAndKeepsIt) {
  const auto start = trained(tiny("start.toml", 1, ""), 1);
  std::string text = read_file(tiny("q.toml", 1, ""));
  text += "[features.lora]\nrank = 2\nalpha = 4.0\nbase = \"int8\"\ntargets = [\"fc2\"]\n";
  const std::string model_file = model(text, "q.toml");
  const auto tuned = trained(model_file, 3, " --init-from " + dir.file("start-run"));
  for (const auto& [name, rows, cols] : {std::tuple{"fc1.weight", 16, 8}, {"fc2.weight", 4, 16}}) {
    const auto* w = start.find(name);
    ASSERT_NE(w, nullptr);
    const auto q = host::quant::quantize_weights(
        std::span(reinterpret_cast<const float*>(w->data.data()), size_t(rows * cols)), rows, cols, true);
    const auto* held = tuned.find(name);
    ASSERT_NE(held, nullptr);
    EXPECT_EQ(held->dtype, TDM_S8);
    EXPECT_EQ(std::memcmp(held->data.data(), q.values.data(), q.values.size()), 0) << name;
    const auto* scale = tuned.find(std::string(name) + "_scale");
    ASSERT_NE(scale, nullptr);
    EXPECT_EQ(scale->shape, (std::vector<int64_t>{rows}));
    EXPECT_EQ(std::memcmp(scale->data.data(), q.scales.data(), q.scales.size() * 4), 0) << name;
  }
  EXPECT_EQ(bytes(tuned, "fc1.bias"), bytes(start, "fc1.bias"));
  for (const auto& t : tuned.tensors) {
    if (t.name.rfind("optim.", 0) != 0 || t.shape.empty()) continue;
    EXPECT_NE(t.name.find(".lora_"), std::string::npos) << t.name << ": optimizer state of a frozen weight";
  }
  // Its own checkpoints resume as they are.
  const std::string run = dir.file("q-run");
  CliRun resumed = tandem("train " + model_file + " --device reference --run-dir " + run + " --resume " +
                          run + " --set train.steps=4");
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  // A fresh start has nothing to quantize.
  CliRun fresh = tandem("train " + model_file + " --device reference --run-dir " + dir.file("fresh"));
  EXPECT_EQ(fresh.code, 4) << fresh.output;
  EXPECT_HAS(fresh.output, "--init-from");
}

// A narrow base computes as its f32 values (INT8: q·scale; bf16: widened):
// the adapters train bit for bit as plain LoRA started from those weights.
TEST_F(FrozenLayers, LoraOnANarrowBaseTrainsAsOnItsWidenedWeights) {
  const auto start = trained(tiny("start.toml", 1, ""), 1);
  std::string text = read_file(tiny("plain.toml", 1, ""));
  const std::string relu = "activation = \"relu\"\n";  // an adapter adds before any activation
  text.erase(text.find(relu), relu.size());
  text += "[features.lora]\nrank = 2\nalpha = 4.0\ntargets = [\"fc1\", \"fc2\"]\n";
  for (const std::string base : {"int8", "bf16"}) {
    std::string narrow_text = text;
    narrow_text.insert(narrow_text.find("targets"), "base = \"" + base + "\"\n");
    const auto narrow =
        trained(model(narrow_text, base + ".toml"), 3, " --init-from " + dir.file("start-run"));
    host::checkpoint::Checkpoint widened = start;  // the same weights, widened on the host
    for (auto& t : widened.tensors) {
      const auto* q = narrow.find(t.name);
      const auto* s = narrow.find(t.name + "_scale");
      if (q == nullptr || (q->dtype != TDM_S8 && q->dtype != TDM_BF16)) continue;
      float* w = reinterpret_cast<float*>(t.data.data());
      for (int64_t k = 0; k < t.shape[0] * t.shape[1]; ++k) {
        if (q->dtype == TDM_BF16) {
          uint16_t bits;
          std::memcpy(&bits, q->data.data() + 2 * k, 2);
          w[k] = bf16_to_f32(bits);
        } else {
          ASSERT_NE(s, nullptr);
          w[k] = float(reinterpret_cast<const int8_t*>(q->data.data())[k]) *
                 reinterpret_cast<const float*>(s->data.data())[k / t.shape[1]];
        }
      }
    }
    const std::string from = dir.file(base + "-widened.safetensors");
    ASSERT_TRUE(host::checkpoint::write_safetensors(from, widened).ok());
    const auto plain = trained(model(text, base + "-plain.toml"), 3, " --init-from " + from);
    for (const char* adapter : {"fc1.lora_A", "fc1.lora_B", "fc2.lora_A", "fc2.lora_B"})
      EXPECT_EQ(bytes(narrow, adapter), bytes(plain, adapter)) << base << " " << adapter;
  }
}

}  // namespace
}  // namespace tandem::test
