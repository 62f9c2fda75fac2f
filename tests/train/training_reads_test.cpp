// What a training step reads back from its device: the loss and the count
// of right predictions stay on the device (count_correct and a running
// sum) and are read once per log interval, never the logits; the reported
// loss is the loss the device computed.
#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "model/model_parser.hpp"
#include "reference_device.hpp"
#include "temp_dir.hpp"
#include "train/trainer.hpp"

namespace tandem::test {
namespace {

// A byte-level language model (one label per token: 8 x 16 predictions a
// step), on a text file the test writes.
std::string model_text(const std::string& text_file) {
  return R"([model]
name = "reads"
task = "language_model"
context = 16
vocab_size = 256
[[layers]]
name = "tokens"
op = "embedding"
num_embeddings = 256
embedding_dim = 16
[[layers]]
name = "head"
op = "linear"
out_features = 256
[train]
optimizer = "sgd"
lr = 0.1
batch_size = 8
seed = 3
[data]
format = "tokens"
train_tokens = ")" +
         text_file + R"("
windows_per_epoch = 400
)";
}

struct Reads {
  uint64_t count = 0, bytes = 0;
  host::train::TrainResult result;
};

class TrainingReads : public ReferenceDevice {
 protected:
  Reads train(int64_t steps, const std::string& run_dir, int64_t log_every = 5) {
    const std::string text = run_dir + ".txt";
    {
      std::ofstream out(text);
      for (int i = 0; i < 200; ++i) out << "the quick brown fox jumps over the lazy dog " << i << "\n";
    }
    auto spec = host::model::parse_model_text(
        model_text(text), run_dir + ".toml",
        {"train.steps=" + std::to_string(steps), "train.log_every=" + std::to_string(log_every)});
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    host::train::TrainOptions o;
    o.run_dir = run_dir;
    auto t = host::train::Trainer::create(*spec, *device_, *registry_, o);
    EXPECT_TRUE(t.ok()) << t.error().message;
    if (!t.ok()) return {};
    EXPECT_NE((*t)->model().train_stats, host::kNoValue) << "the reference backend counts on the device";
    auto r = (*t)->run();
    EXPECT_TRUE(r.ok()) << r.error().message;
    return {(*t)->executor().host_reads(), (*t)->executor().host_read_bytes(),
            r.ok() ? *r : host::train::TrainResult{}};
  }
};

TEST_F(TrainingReads, OneSmallReadPerLogIntervalAndNoLogits) {
  TempDir dir;
  // Both runs end the same way (the last step's loss, a checkpoint of the
  // same tensors): the 10 steps more cost two reads of the two running sums.
  const Reads ten = train(10, dir.file("ten"));
  const Reads twenty = train(20, dir.file("twenty"));
  EXPECT_EQ(twenty.count - ten.count, 2u);
  EXPECT_EQ(twenty.bytes - ten.bytes, 2u * 2 * sizeof(float));
  // The whole run of 20 steps, logits of 8 x 16 x 32 floats a step among
  // them before, read far less than one step's logits.
  EXPECT_LT(twenty.bytes, 16u * 1024u * 4u + 8u * 16u * 32u * 4u);
}

TEST_F(TrainingReads, ReportedLossAndAccuracyAreTheDevices) {
  TempDir dir;
  const std::string run = dir.file("run");
  const Reads one = train(1, run, 1);
  std::ifstream metrics(run + "/metrics.jsonl");
  std::string line;
  nlohmann::json step;
  while (std::getline(metrics, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.value("event", "") == "step") step = j;
  }
  ASSERT_FALSE(step.is_null()) << "no step line in metrics.jsonl";
  // One step of one micro-batch: the running sum holds exactly its loss.
  EXPECT_DOUBLE_EQ(step["loss"].get<double>(), static_cast<double>(static_cast<float>(one.result.last_loss)));
  const double accuracy = step["accuracy"].get<double>();
  EXPECT_GE(accuracy, 0.0);
  EXPECT_LE(accuracy, 1.0);
  // 128 predictions: the accuracy is a whole number of them.
  EXPECT_DOUBLE_EQ(accuracy * 128.0, std::round(accuracy * 128.0));
}

}  // namespace
}  // namespace tandem::test
