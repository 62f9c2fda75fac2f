// `trainable = false`: a frozen layer keeps the weights it started from, has
// no gradient and no optimizer state (and the plan shows the memory saved),
// while the gradient still flows through it to the layers before it. And
// [features.lora], which freezes the whole base and trains adapters.
#include <cstdio>
#include <filesystem>

#include "checkpoint/safetensors.hpp"
#include "cli_support.hpp"

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

}  // namespace
}  // namespace tandem::test
