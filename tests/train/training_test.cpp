// Training runs on the reference backend with synthetic data: the loss
// falls, the same seed gives the same run bit for bit, and a resumed run
// ends with exactly the weights of an uninterrupted one.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/safetensors.hpp"
#include "model/model_parser.hpp"
#include "reference_device.hpp"
#include "temp_dir.hpp"
#include "train/checkpointing.hpp"
#include "train/trainer.hpp"

namespace tandem::test {
namespace {

// Four well-separated clusters in 8 dims; dropout and momentum make the
// resume test cover RNG offsets and optimizer state.
const char* kModel = R"([model]
name = "synthetic_mlp"
input = [8]
classes = 4
[[layers]]
name = "fc1"
op = "linear"
out_features = 32
activation = "relu"
[[layers]]
name = "drop"
op = "dropout"
p = 0.1
[[layers]]
name = "fc2"
op = "linear"
out_features = 4
[train]
optimizer = "sgd"
lr = 0.05
momentum = 0.9
batch_size = 16
epochs = 3
seed = 7
log_every = 1
[data]
format = "synthetic"
synthetic_samples = 320
synthetic_test_samples = 160
synthetic_noise = 0.5
threads = 2
)";

class Training : public ReferenceDevice {
 protected:
  host::model::ModelSpec spec(std::vector<std::string> overrides = {}) {
    auto s = host::model::parse_model_text(kModel, "synthetic.toml", overrides);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return *s;
  }
  host::train::TrainResult train(const host::model::ModelSpec& s, const std::string& run_dir,
                                 const std::string& resume = "") {
    host::train::TrainOptions o;
    o.run_dir = run_dir;
    o.resume = resume;
    auto t = host::train::Trainer::create(s, *device_, *registry_, o);
    EXPECT_TRUE(t.ok()) << t.error().message;
    if (!t.ok()) return {};
    auto r = (*t)->run();
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : host::train::TrainResult{};
  }
  static std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static host::checkpoint::Checkpoint last(const std::string& run_dir) {
    auto path = host::train::latest_checkpoint(run_dir);
    EXPECT_TRUE(path.has_value());
    auto cp = host::checkpoint::read_safetensors(*path);
    EXPECT_TRUE(cp.ok());
    return *cp;
  }
};

TEST_F(Training, LossFallsAndTestAccuracyIsHigh) {
  TempDir dir;
  // Chance is ln 4 = 1.386 loss and 25% accuracy; the clusters are separable.
  auto r = train(spec(), dir.file("run"));
  EXPECT_EQ(r.steps, 60);  // 320 / 16 = 20 steps per epoch, 3 epochs
  EXPECT_LT(r.last_loss, 0.3);
  ASSERT_TRUE(r.test_accuracy.has_value());
  EXPECT_GT(*r.test_accuracy, 0.9);
}

TEST_F(Training, SameSeedGivesTheSameRunBitForBit) {
  TempDir dir;
  train(spec(), dir.file("a"));
  train(spec(), dir.file("b"));
  // metrics.jsonl holds every step's loss as a shortest round-trip double.
  std::string a = read_text(dir.file("a/metrics.jsonl")), b = read_text(dir.file("b/metrics.jsonl"));
  auto strip_speed = [](std::string s) {  // throughput varies run to run; losses must not
    std::string out;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);) {
      auto pos = line.find("\"loss\":");
      out += pos == std::string::npos ? "" : line.substr(pos, line.find(',', pos) - pos) + "\n";
    }
    return out;
  };
  EXPECT_EQ(strip_speed(a), strip_speed(b));
  EXPECT_FALSE(strip_speed(a).empty());
  const auto ca = last(dir.file("a")), cb = last(dir.file("b"));
  ASSERT_EQ(ca.tensors.size(), cb.tensors.size());
  for (size_t i = 0; i < ca.tensors.size(); ++i)
    EXPECT_EQ(ca.tensors[i].data, cb.tensors[i].data) << ca.tensors[i].name;
}

TEST_F(Training, ResumedRunMatchesUninterruptedRunBitForBit) {
  TempDir dir;
  train(spec(), dir.file("straight"));                           // 3 epochs
  train(spec({"train.epochs=2"}), dir.file("split"));            // 2 epochs, then ...
  auto r = train(spec(), dir.file("split"), dir.file("split"));  // ... resumed to 3
  EXPECT_EQ(r.steps, 60);
  const auto a = last(dir.file("straight")), b = last(dir.file("split"));
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& t : a.tensors) {
    const auto* u = b.find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(t.data, u->data) << t.name << " differs after resume";
  }
}

TEST_F(Training, ResumeRefusesACheckpointOfAnotherModel) {
  TempDir dir;
  train(spec({"train.epochs=1"}), dir.file("run"));
  host::train::TrainOptions o;
  o.run_dir = dir.file("run");
  o.resume = dir.file("run");
  auto t = host::train::Trainer::create(spec({"layers.fc1.out_features=16"}), *device_, *registry_, o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("written for a different model file"), std::string::npos)
      << t.error().message;
}

TEST_F(Training, KeepsOnlyTheLastCheckpoints) {
  TempDir dir;
  train(spec({"train.keep_checkpoints=2"}), dir.file("run"));
  size_t count = 0;
  for (const auto& e : std::filesystem::directory_iterator(host::train::checkpoint_dir(dir.file("run"))))
    count += e.path().extension() == ".safetensors";
  EXPECT_EQ(count, 2u);
}

}  // namespace
}  // namespace tandem::test
