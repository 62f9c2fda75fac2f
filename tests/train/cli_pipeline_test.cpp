// `tandem plan` and `tandem train` of micro-batches pipelined over two CPU
// devices (the onednn plugin's cores as onednn:0 and onednn:1), as a user
// runs them.
#include <regex>

#include "cli_support.hpp"

namespace tandem::test {
namespace {

class PipelineCli : public CliTest {
 protected:
  // kSynthetic with a repeat block of two linear layers in front, one copy
  // on each device, and its batch of 16 in 4 micro-batches.
  std::string split_model() {
    std::string text = kSynthetic;
    text.replace(text.find("[[layers]]\nname = \"fc1\""), 0,
                 "[[layers]]\nname = \"h\"\nop = \"repeat\"\ncount = 2\n"
                 "device = [\"onednn:0\", \"onednn:1\"]\n"
                 "  [[layers.body]]\n  name = \"fc\"\n  op = \"linear\"\n  out_features = 32\n"
                 "  activation = \"relu\"\n");
    text.replace(text.find("batch_size = 8"), 14, "batch_size = 16\npipeline_microbatches = 4");
    return model(text);
  }
  static constexpr const char* kTwo = " --plugin-option onednn.devices=2 --threads 2 --device onednn:1";
};

// `plan` shows the stages, what each holds at once and the bubble; `train
// --memory-report` each device's busy and idle time; `--profile` one track
// per stage.
TEST_F(PipelineCli, MicroBatchesArePipelinedOverTwoCpuDevices) {
  const std::string m = split_model();
  CliRun plan = tandem("plan " + m + kTwo);
  if (plan.output.find("more devices than") != std::string::npos)
    GTEST_SKIP() << "this process may run on one CPU only: " << plan.output;
  ASSERT_EQ(plan.code, 0) << plan.output;
  EXPECT_HAS(plan.output,
             "pipeline: 2 stages x 4 micro-batches, one forward one backward; bubble (S-1)/(M+S-1) = 20.0 %");
  EXPECT_HAS(plan.output, "stage 0 onednn:0: layers h.0.fc, 2 micro-batches in flight");
  EXPECT_HAS(plan.output, "stage 1 onednn:1: layers h.1.fc .. fc2, 1 micro-batch in flight");
  CliRun r = tandem("train " + m + kTwo + " --set train.epochs=1 --memory-report --profile " +
                    dir.file("t.json") + " --run-dir " + dir.file("run"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "pipeline: 2 stages x 4 micro-batches, forward and backward");
  const std::regex busy(
      "stage 0 onednn:0: busy [0-9.]+ ms, idle [0-9.]+ ms per step; 2 micro-batches in flight");
  EXPECT_TRUE(std::regex_search(r.output, busy)) << r.output;
  const std::string trace = read_file(dir.file("t.json"));
  EXPECT_HAS(trace, "onednn:1 pipeline stage 1");
  EXPECT_HAS(trace, "\"backward 3\"");
}

// Without pins, on `--device onednn:0,onednn:1`, automatic placement cuts
// the layers into two stages of consecutive layers, balanced by their
// measured times, and the run pipelines over them.
TEST_F(PipelineCli, AutomaticPlacementCutsBalancedStages) {
  std::string text = kSynthetic;
  text.replace(text.find("batch_size = 8"), 14, "batch_size = 16\npipeline_microbatches = 4");
  const std::string m = model(text);
  const std::string both = " --plugin-option onednn.devices=2 --threads 2 --device onednn:0,onednn:1";
  CliRun plan = tandem("plan " + m + both);
  if (plan.output.find("more devices than") != std::string::npos)
    GTEST_SKIP() << "this process may run on one CPU only: " << plan.output;
  ASSERT_EQ(plan.code, 0) << plan.output;
  EXPECT_HAS(plan.output, "placement auto");
  EXPECT_HAS(plan.output, "pipeline: 2 stages x 4 micro-batches");
  // The two devices are alike: either may take the first stage.
  const std::regex stages("stage 0 onednn:[01]: layers fc1, [^\n]*\n  stage 1 onednn:[01]: layers fc2,");
  EXPECT_TRUE(std::regex_search(plan.output, stages)) << plan.output;
  // Within budgets of what the plan says each device holds (micro-batches
  // in flight included), the run trains so.
  std::smatch total;
  ASSERT_TRUE(std::regex_search(plan.output, total, std::regex("\n  total +([0-9.]+) KiB +([0-9.]+) KiB\n")))
      << plan.output;
  const auto budget = [&](int column) {
    return std::to_string(int(std::stod(total[column]) * 1.05) + 1) + "KiB";
  };
  CliRun r = tandem("train " + m + both + " --set train.epochs=1 --memory-report --run-dir " +
                    dir.file("run") + " --memory-budget onednn:0=" + budget(1) + ",onednn:1=" + budget(2));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "pipeline: 2 stages x 4 micro-batches, forward and backward");
}

}  // namespace
}  // namespace tandem::test
