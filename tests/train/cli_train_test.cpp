// `tandem train` and `tandem eval` as a user runs them: bad input of every
// kind gives a clear message and the documented exit code, a corrupted
// checkpoint is refused without touching anything, and Ctrl-C stops cleanly
// with a checkpoint that resumes to exactly the uninterrupted result.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "cli_support.hpp"

namespace tandem::test {
namespace {

class TrainCli : public CliTest {
 protected:
  // A byte-level language model of two blocks on a repeated sentence
  // (validation held out, no test split); its model file's path.
  std::string byte_language_model() {
    std::string text;
    for (int i = 0; i < 200; ++i) text += "the cat sat on the mat. ";
    { std::ofstream(dir.file("text.txt")) << text; }
    return model(R"([model]
task = "language_model"
context = 16
vocab_size = 256
[[layers]]
name = "tok"
op = "embedding"
num_embeddings = 256
embedding_dim = 32
[[layers]]
name = "pos"
op = "position_embedding"
[[layers]]
name = "h"
op = "repeat"
count = 2
[[layers.body]]
name = "ln"
op = "layer_norm"
[[layers.body]]
name = "attn"
op = "attention"
heads = 4
[[layers.body]]
name = "res"
op = "add"
inputs = ["h", "attn"]
[[layers.body]]
name = "fc"
op = "linear"
out_features = 64
activation = "relu"
[[layers.body]]
name = "proj"
op = "linear"
out_features = 32
[[layers.body]]
name = "res2"
op = "add"
inputs = ["res", "proj"]
[[layers]]
name = "head"
op = "linear"
out_features = 256
tie_weight = "tok"
bias = false
[train]
optimizer = "adamw"
lr = 0.01
batch_size = 16
steps = 60
seed = 2
[data]
format = "tokens"
train_tokens = ")" +
                 dir.file("text.txt") +
                 R"("
validation_split = 0.1
windows_per_epoch = 320
)");
  }

  // A run's memory record for `device` (metrics.jsonl, "event": "memory"):
  // the allocator's peak during the training steps, and with evaluation.
  static std::pair<uint64_t, uint64_t> memory_figures(const std::string& run_dir, const std::string& device) {
    std::ifstream in(run_dir + "/metrics.jsonl");
    const std::regex record(
        "\"device\":\"" + device +
        "\",\"event\":\"memory\",\"peak_bytes\":([0-9]+),.*\"training_peak_bytes\":([0-9]+)");
    std::smatch m;
    for (std::string line; std::getline(in, line);)
      if (std::regex_search(line, m, record)) return {std::stoull(m[2]), std::stoull(m[1])};
    ADD_FAILURE() << run_dir << "/metrics.jsonl has no memory record for " << device;
    return {0, 0};
  }
};

TEST_F(TrainCli, TrainsAndEvaluates) {
  const std::string m = model(kSynthetic);
  CliRun r = tandem("train " + m + " --run-dir " + dir.file("run") + " --device reference");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "test accuracy");
  EXPECT_TRUE(std::filesystem::exists(dir.file("run/metrics.jsonl")));
  CliRun e = tandem("eval " + m + " --weights " + dir.file("run"));
  EXPECT_EQ(e.code, 0) << e.output;
  EXPECT_HAS(e.output, "test samples 64");
}

// What a device with memory of its own (a GPU; here reference:0 given a
// capacity by TANDEM_DEVICE_MEMORY_LIMIT) says is in use, beside the plan
// and the host allocator's count: in --memory-report and tandem bench. A
// CPU device whose memory is the machine's says nothing (other processes
// move its free memory).
TEST_F(TrainCli, TheDevicesOwnCountOfItsMemoryIsShownBesideThePlan) {
  const std::string m = model(kSynthetic);
  const std::string limit = "TANDEM_DEVICE_MEMORY_LIMIT=reference:0=64MiB";
  CliRun r =
      tandem("train " + m + " --run-dir " + dir.file("run") + " --device reference:0 --memory-report", limit);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::regex reported("device reports +[0-9.]+ [KMG]?i?B \\([+-][0-9.]+% of the plan\\) in use now");
  EXPECT_TRUE(std::regex_search(r.output, reported)) << r.output;
  CliRun bench = tandem("bench " + m + " --device reference:0 --steps 2 --warmup 1 --repeats 1", limit);
  ASSERT_EQ(bench.code, 0) << bench.output;
  EXPECT_HAS(bench.output, ", the device reports ");
  CliRun unlimited =
      tandem("train " + m + " --run-dir " + dir.file("run2") + " --device reference:0 --memory-report");
  ASSERT_EQ(unlimited.code, 0) << unlimited.output;
  EXPECT_EQ(unlimited.output.find("device reports"), std::string::npos) << unlimited.output;
}

// A device that holds less than the plan counted on (a GPU another process
// took memory from; here TANDEM_DEVICE_MEMORY_LIMIT): the run re-plans within
// what the device held and trains, or, with nowhere to move layers, is
// refused before training with what to change.
TEST_F(TrainCli, RunningOutOfDeviceMemoryAtRunTimeRePlans) {
  std::string text = kSynthetic;
  text.replace(text.find("input = [8]"), 11, "input = [64]");
  text.replace(text.find("out_features = 16"), 17, "out_features = 256");
  const std::string m = model(text);
  const std::string limit = "TANDEM_DEVICE_MEMORY_LIMIT=onednn:0=100KiB";
  CliRun r = tandem("train " + m + " --run-dir " + dir.file("run") +
                        " --device onednn:0,reference:0 --placement pinned --set train.epochs=1",
                    limit);
  if (r.output.find("no device matches 'onednn:0'") != std::string::npos) GTEST_SKIP() << "no onednn plugin";
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "onednn:0 ran out of memory at run time: it held ");
  EXPECT_HAS(r.output, "Re-planned within ");
  EXPECT_HAS(r.output, "fc1 -> reference:0");
  EXPECT_HAS(r.output, "test accuracy");
  CliRun alone = tandem("train " + m + " --run-dir " + dir.file("run2") + " --device onednn:0", limit);
  // Alone, it has nowhere to move layers: refused before the first step,
  // against the device's whole memory (no --memory-budget was given).
  EXPECT_EQ(alone.code, 1) << alone.output;
  EXPECT_HAS(alone.output, "but it has 100.0 KiB in all: over by ");
  EXPECT_EQ(alone.output.find("--memory-budget"), std::string::npos) << alone.output;
  EXPECT_HAS(alone.output, "To fit: ");
  EXPECT_HAS(alone.output, "--device onednn:0,cpu");
  CliRun malformed = tandem("train " + m + " --run-dir " + dir.file("run3") + " --device onednn:0",
                            "TANDEM_DEVICE_MEMORY_LIMIT=onednn:0=lots");
  EXPECT_NE(malformed.code, 0) << malformed.output;
  EXPECT_HAS(malformed.output, "TANDEM_DEVICE_MEMORY_LIMIT: 'lots' for onednn:0 is not a size");
}

// A device too small for the model's parameters, gradients and optimizer
// state: the run streams them from host memory (saying so), trains and
// evaluates; --memory-report and the trace show the copies, tandem plan the
// window and the traffic; --no-stream is refused with what streaming needs.
TEST_F(TrainCli, ADeviceTooSmallForTheStateStreamsItFromHostMemory) {
  std::string text = "[model]\nname = \"deep\"\ninput = [64]\nclasses = 4\n";
  for (int i = 1; i <= 6; ++i)
    text += "[[layers]]\nname = \"fc" + std::to_string(i) +
            "\"\nop = \"linear\"\nout_features = " + (i < 6 ? "64\nactivation = \"relu\"\n" : "4\n");
  text +=
      "[train]\noptimizer = \"adamw\"\nlr = 0.01\nbatch_size = 8\nepochs = 1\nseed = 3\n"
      "[data]\nformat = \"synthetic\"\nsynthetic_samples = 64\nsynthetic_test_samples = 16\n";
  const std::string m = model(text);
  // About 350 KiB resident, two thirds of it AdamW's state and the weights.
  const std::string limit = "TANDEM_DEVICE_MEMORY_LIMIT=reference:0=256KiB";
  CliRun r = tandem("train " + m + " --run-dir " + dir.file("run") +
                        " --device reference:0 --memory-report --profile " + dir.file("trace.json"),
                    limit);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "with everything resident, over what it has by ");
  EXPECT_HAS(r.output, "layers' parameters, gradients and optimizer state (");
  EXPECT_HAS(r.output, "streamed per training step: ");
  EXPECT_HAS(r.output, "test accuracy");
  std::ifstream trace(dir.file("trace.json"));
  const std::string events((std::istreambuf_iterator<char>(trace)), std::istreambuf_iterator<char>());
  EXPECT_HAS(events, "reference:0 copy stream (streamed parameters)");
  EXPECT_HAS(events, "\"fetch fc1.weight\"");
  EXPECT_HAS(events, "\"write home fc1.weight\"");
  CliRun plan = tandem("plan " + m + " --device reference:0", limit);
  ASSERT_EQ(plan.code, 0) << plan.output;
  EXPECT_HAS(plan.output, "reference:0 streamed");
  EXPECT_HAS(plan.output, "of it window");
  EXPECT_HAS(plan.output,
             " cross to and from reference:0 per step, fetched 1 layer ahead into a window of at most ");
  CliRun resident =
      tandem("train " + m + " --run-dir " + dir.file("run2") + " --device reference:0 --no-stream", limit);
  EXPECT_EQ(resident.code, 1) << resident.output;
  EXPECT_HAS(resident.output, "stream them through reference:0 with --stream-params (it then needs ");
  CliRun both = tandem("plan " + m + " --device reference:0 --stream-params --no-stream");
  EXPECT_EQ(both.code, 2) << both.output;
  EXPECT_HAS(both.output, "give one of them");
}

// A device with room for training but not for an evaluation executor beside
// it: the test set is evaluated in smaller batches, with the same numbers.
TEST_F(TrainCli, EvaluationThatDoesNotFitBesideTrainingRunsInSmallerBatches) {
  std::string text = kSynthetic;
  text.replace(text.find("input = [8]"), 11, "input = [64]");
  text.replace(text.find("out_features = 16"), 17, "out_features = 512");
  text.replace(text.find("batch_size = 8"), 14, "batch_size = 256");
  text.replace(text.find("lr = 0.05"), 9, "lr = 0.01");
  text.replace(text.find("synthetic_samples = 256"), 23, "synthetic_samples = 1024\nsynthetic_noise = 2.0");
  text.replace(text.find("synthetic_test_samples = 64"), 27, "synthetic_test_samples = 512");
  const std::string m = model(text);
  const std::string args = " --device onednn:0 --set train.epochs=1 --no-prefetch";
  CliRun free = tandem("train " + m + " --run-dir " + dir.file("free") + args);
  if (free.output.find("no device matches 'onednn:0'") != std::string::npos)
    GTEST_SKIP() << "no onednn plugin";
  ASSERT_EQ(free.code, 0) << free.output;
  // What training and evaluation hold depends on the CPU (oneDNN's
  // scratchpads differ between AVX2 and AVX-512), so the limit comes from
  // this machine's own figures (metrics.jsonl): room for training and for
  // three quarters of what evaluating in batches of 256 adds.
  const auto [training, with_eval] = memory_figures(dir.file("free"), "onednn:0");
  ASSERT_GT(with_eval, training) << "evaluation added nothing to measure";
  const uint64_t limit_kib = (training + (with_eval - training) * 3 / 4) / 1024;
  CliRun tight = tandem("train " + m + " --run-dir " + dir.file("tight") + args,
                        "TANDEM_DEVICE_MEMORY_LIMIT=onednn:0=" + std::to_string(limit_kib) + "KiB");
  ASSERT_EQ(tight.code, 0) << tight.output;
  EXPECT_HAS(tight.output, "evaluation did not fit beside training with batches of 256");
  EXPECT_HAS(tight.output, "evaluating in batches of 128 instead");
  const auto eval = [](const std::string& out) {
    const size_t at = out.find("eval loss");
    return at == std::string::npos ? std::string("(none)") : out.substr(at, out.find('\n', at) - at);
  };
  EXPECT_EQ(eval(tight.output), eval(free.output));
}

// `tandem plan`: fc1 pinned to reference:0, the rest on the default device;
// the table as users see it, and a budget the plan exceeds exits non-zero.
TEST_F(TrainCli, PlanShowsDevicesMemoryAndCopiesWithoutTraining) {
  std::string text = kSynthetic;
  text.replace(text.find("activation = \"relu\""), 19, "activation = \"relu\"\ndevice = \"reference\"");
  const std::string m = model(text);
  CliRun r = tandem("plan " + m + " --device onednn");
  if (r.output.find("no device matches 'onednn'") != std::string::npos) GTEST_SKIP() << "no onednn plugin";
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "2 devices, placement pinned");
  EXPECT_HAS(r.output, "fc1                  linear       reference:0");
  EXPECT_HAS(r.output, "(pinned)");
  EXPECT_HAS(r.output, "fc2                  linear       onednn:0");
  EXPECT_HAS(r.output, "memory per device         onednn:0      reference:0");
  EXPECT_HAS(r.output, "copies per step: 3");
  EXPECT_HAS(r.output, "512 B  reference:0 -> onednn:0  (layer 'fc1' -> 'fc2', forward)");
  EXPECT_HAS(r.output, "estimated step time: ");
  EXPECT_HAS(r.output, "+ transfers ");
  EXPECT_FALSE(std::filesystem::exists("runs/tiny")) << "plan must not train";
  CliRun tight = tandem("plan " + m + " --device onednn --memory-budget reference=1KiB");
  EXPECT_EQ(tight.code, 1) << tight.output;
  EXPECT_HAS(tight.output, "does not fit: reference:0 needs");
  EXPECT_HAS(tight.output, "but its budget is 1.0 KiB: over by");
  CliRun strict = tandem("plan " + m + " --device onednn --placement strict");
  EXPECT_EQ(strict.code, 4) << strict.output;
  EXPECT_HAS(strict.output, "placement = \"strict\": layer 'fc2' on onednn:0 reads 'fc1'");
}

// plan and bench read --feature as train does: the plan of 2 micro-batches
// of 4, a benchmark of them that says so, and a malformed flag refused as usage.
TEST_F(TrainCli, PlanAndBenchTakeFeatureFlagsAsTrainDoes) {
  const std::string m = model(kSynthetic);
  CliRun plan = tandem("plan " + m + " --device reference --feature grad_accum:micro_batch=4");
  ASSERT_EQ(plan.code, 0) << plan.output;
  EXPECT_HAS(plan.output, "batch 4 per micro-batch x 2");
  CliRun bench =
      tandem("bench " + m +
             " --device reference --steps 2 --warmup 1 --repeats 1 --feature grad_accum:micro_batch=4");
  ASSERT_EQ(bench.code, 0) << bench.output;
  EXPECT_HAS(bench.output, "features    grad_accum (micro_batch=4)");
  EXPECT_HAS(bench.output, "last loss");
  CliRun bad = tandem("plan " + m + " --feature grad_accum:micro_batch");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_HAS(bad.output, "'micro_batch' is not KEY=VALUE");
}

// --profile on two devices: each device's nodes on a track of its own,
// copies between them on theirs, and each node with its backend's own
// description of the kernel that ran it (onednn's implementation names).
TEST_F(TrainCli, ProfileTraceShowsEachDeviceAndItsKernels) {
  std::string text = kSynthetic;
  text.replace(text.find("activation = \"relu\""), 19, "activation = \"relu\"\ndevice = \"reference\"");
  CliRun r = tandem("train " + model(text) + " --device onednn --run-dir " + dir.file("run") +
                    " --set train.epochs=1 --profile " + dir.file("trace.json"));
  if (r.output.find("no device matches 'onednn'") != std::string::npos) GTEST_SKIP() << "no onednn plugin";
  ASSERT_EQ(r.code, 0) << r.output;
  const auto trace = nlohmann::json::parse(read_file(dir.file("trace.json")));
  std::map<int, std::string> tracks;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name") tracks[e.at("tid")] = e.at("args").at("name");
  std::map<std::string, std::set<std::string>> layers_on;  // track -> layers
  bool described = false;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || !e.contains("args") || !e.at("args").contains("layer")) continue;
    const std::string track = tracks.at(e.at("tid"));
    layers_on[track].insert(e.at("args").at("layer").get<std::string>());
    EXPECT_EQ(track, e.at("args").at("device").get<std::string>() + " stream 0");
    described |= track == "onednn:0 stream 0" && e.at("args").contains("kernel");
  }
  EXPECT_TRUE(layers_on["reference:0 stream 0"].count("fc1")) << trace.dump(1).substr(0, 2000);
  EXPECT_TRUE(layers_on["onednn:0 stream 0"].count("fc2"));
  EXPECT_FALSE(layers_on["onednn:0 stream 0"].count("fc1"));
  EXPECT_TRUE(described) << "onednn nodes carry their kernel_describe text";
}

// Placed on two devices: --memory-report says how much of the copy time
// between them compute hid, and --no-prefetch (each batch written when its
// step starts) trains to the same loss.
TEST_F(TrainCli, MemoryReportShowsHiddenCopyTimeAndNoPrefetchTrainsTheSame) {
  std::string text = kSynthetic;
  text.replace(text.find("activation = \"relu\""), 19, "activation = \"relu\"\ndevice = \"reference\"");
  const std::string m = model(text);
  CliRun a = tandem("train " + m + " --device onednn --memory-report --run-dir " + dir.file("a"));
  if (a.output.find("no device matches 'onednn'") != std::string::npos) GTEST_SKIP() << "no onednn plugin";
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_HAS(a.output, "copy time per step: ");
  EXPECT_HAS(a.output, "% hidden behind compute");
  CliRun b = tandem("train " + m + " --device onednn --no-prefetch --run-dir " + dir.file("b"));
  ASSERT_EQ(b.code, 0) << b.output;
  const auto loss = [](const std::string& output) {
    const size_t at = output.rfind("train loss ");
    return at == std::string::npos ? std::string() : output.substr(at, 17);
  };
  EXPECT_FALSE(loss(a.output).empty()) << a.output;
  EXPECT_EQ(loss(a.output), loss(b.output));
}

TEST_F(TrainCli, MalformedModelFileNamesLineAndColumn) {
  CliRun r = tandem("train " + model("[model]\ninput = [8\n"));
  EXPECT_EQ(r.code, 4);
  EXPECT_HAS(r.output, dir.file("m.toml") + ":2:");
}

TEST_F(TrainCli, UnknownKeyAndBadOverride) {
  std::string text = kSynthetic;
  text.replace(text.find("momentum"), 8, "momentun");
  CliRun r = tandem("train " + model(text));
  EXPECT_EQ(r.code, 4);
  EXPECT_HAS(r.output, "unknown key 'momentun' (did you mean 'momentum'?)");
  CliRun o = tandem("train " + model(kSynthetic, "ok.toml") + " --set train.lr=fast");
  EXPECT_EQ(o.code, 4);
  EXPECT_HAS(o.output, "'lr' must be a number");
}

TEST_F(TrainCli, SetOverridesTheModelFile) {
  CliRun r = tandem("train " + model(kSynthetic) + " --run-dir " + dir.file("run") + " --set train.epochs=1" +
                    " --set train.batch_size=32");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "batch 32");
  EXPECT_HAS(r.output, "trained 8 steps");  // 256 / 32, one epoch
}

TEST_F(TrainCli, MissingAndCorruptedDataFilesAreNamed) {
  const std::string idx = R"([model]
input = [1, 2, 2]
classes = 2
[[layers]]
op = "linear"
out_features = 2
[data]
format = "idx"
train_images = "IMAGES"
train_labels = "LABELS"
)";
  std::string text = idx;
  text.replace(text.find("IMAGES"), 6, dir.file("nope.gz"));
  text.replace(text.find("LABELS"), 6, dir.file("nope2.gz"));
  CliRun missing = tandem("train " + model(text, "a.toml"));
  EXPECT_EQ(missing.code, 4);
  EXPECT_HAS(missing.output, dir.file("nope.gz") + ": cannot open");

  // A truncated gzip IDX file: header says 10 images of 2x2, data stops early.
  gzFile f = gzopen(dir.file("short.gz").c_str(), "wb");
  const unsigned char header[] = {0, 0, 8, 3, 0, 0, 0, 10, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3};
  gzwrite(f, header, sizeof header);
  gzclose(f);
  text = idx;
  text.replace(text.find("IMAGES"), 6, dir.file("short.gz"));
  text.replace(text.find("LABELS"), 6, dir.file("short.gz"));
  CliRun truncated = tandem("train " + model(text, "b.toml"));
  EXPECT_EQ(truncated.code, 4);
  EXPECT_HAS(truncated.output, dir.file("short.gz") + ": truncated at offset 19");
}

TEST_F(TrainCli, CorruptedCheckpointIsRefusedAndLeftAlone) {
  const std::string m = model(kSynthetic);
  ASSERT_EQ(tandem("train " + m + " --run-dir " + dir.file("run")).code, 0);
  std::string ckpt;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("run/checkpoints")))
    ckpt = e.path().string();
  std::string bytes = read_file(ckpt);
  bytes[bytes.size() - 3] ^= 0x40;  // inside the last tensor
  std::ofstream(ckpt, std::ios::binary) << bytes;
  CliRun r = tandem("train " + m + " --resume " + dir.file("run") + " --set train.epochs=3");
  EXPECT_EQ(r.code, 4);
  EXPECT_HAS(r.output, "failed its checksum");
  EXPECT_HAS(r.output, "nothing was loaded");
  EXPECT_EQ(read_file(ckpt), bytes) << "the refused checkpoint was modified";
}

TEST_F(TrainCli, ExistingRunIsNotOverwritten) {
  const std::string m = model(kSynthetic);
  ASSERT_EQ(tandem("train " + m + " --run-dir " + dir.file("run")).code, 0);
  CliRun again = tandem("train " + m + " --run-dir " + dir.file("run"));
  EXPECT_EQ(again.code, 2);
  EXPECT_HAS(again.output, "already holds checkpoints");
}

TEST_F(TrainCli, CtrlCSavesACheckpointThatResumesExactly) {
  std::string text = kSynthetic;
  text.replace(text.find("epochs = 2"), 10, "epochs = 150");
  const std::string m = model(text);
  ASSERT_EQ(tandem("train " + m + " --run-dir " + dir.file("straight")).code, 0);

  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen(dir.file("interrupted.log").c_str(), "w", stdout);
    ::execl(TANDEM_EXE, TANDEM_EXE, "--allow-insecure-plugins", "train", m.c_str(), "--run-dir",
            dir.file("split").c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  // Interrupt mid-run: once the first epoch has been recorded.
  for (int i = 0;
       i < 200 && read_file(dir.file("split/metrics.jsonl")).find("\"event\":\"epoch\"") == std::string::npos;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 0)
    GTEST_SKIP() << "the run finished before the interrupt arrived (machine too fast)";
  EXPECT_EQ(WEXITSTATUS(status), 130) << read_file(dir.file("interrupted.log"));
  EXPECT_HAS(read_file(dir.file("interrupted.log")), "interrupted: checkpoint saved");

  CliRun resumed = tandem("train " + m + " --resume " + dir.file("split"));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  auto newest = [&](const std::string& run) {
    std::string last;
    for (const auto& e : std::filesystem::directory_iterator(dir.file(run + "/checkpoints")))
      last = std::max(last, e.path().string());
    return last;
  };
  // Same tensors, bit for bit; only the metadata's paths differ.
  auto tensors = [](const std::string& bytes) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
    return bytes.substr(8 + n);
  };
  EXPECT_EQ(tensors(read_file(newest("straight"))), tensors(read_file(newest("split"))));
}

}  // namespace
}  // namespace tandem::test

namespace tandem::test {
namespace {

// A byte-level language model on a small text: it trains from the command
// line, its validation loss falls below that of guessing among the bytes it
// saw, and `tandem plan` lists its repeated blocks.
TEST_F(TrainCli, ALanguageModelLearnsTheBytesOfAText) {
  const std::string m = byte_language_model();
  CliRun plan = tandem("plan " + m);
  ASSERT_EQ(plan.code, 0) << plan.output;
  EXPECT_HAS(plan.output, "h.1.attn");
  CliRun r = tandem("train " + m + " --run-dir " + dir.file("run") + " --device onednn");
  if (r.output.find("no device matches") != std::string::npos)
    GTEST_SKIP() << "no onednn plugin: " << r.output;
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "perplexity ");  // and, for bytes, bits per byte
  EXPECT_HAS(r.output, " bits/byte");
  // 9 distinct bytes: guessing uniformly among them gives ln 9 = 2.20.
  const size_t at = r.output.rfind("eval loss ");  // after the last epoch
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_LT(std::stod(r.output.substr(at + 10)), 1.0) << r.output;
  // Greedy decoding continues the text it learned; sampling with a seed
  // repeats itself; the speed goes to stderr.
  CliRun greedy = tandem("generate " + m + " --weights " + dir.file("run") +
                         " --device onednn --prompt \"the cat \" --tokens 30 --temperature 0");
  ASSERT_EQ(greedy.code, 0) << greedy.output;
  EXPECT_HAS(greedy.output, "the cat sat ");  // words of the text, not random bytes
  EXPECT_HAS(greedy.output, "tokens/s");
  const std::string sample =
      "generate " + m + " --weights " + dir.file("run") + " --device onednn --prompt t --tokens 40 --seed 5";
  const auto words = [](const std::string& out) { return out.substr(0, out.find("generated ")); };
  EXPECT_EQ(words(tandem(sample).output), words(tandem(sample).output));
  // INT8 post-training quantization of its linear layers (the tied head
  // stays f32): the validation loss barely moves, and it generates.
  CliRun q = tandem("quantize " + m + " --weights " + dir.file("run") + " --output " + dir.file("q8") +
                    " --device onednn");
  ASSERT_EQ(q.code, 0) << q.output;
  CliRun f32 = tandem("eval " + m + " --weights " + dir.file("run") + " --split validation --device onednn");
  CliRun int8 = tandem("eval " + m + " --weights " + dir.file("q8") + " --split validation --device onednn");
  ASSERT_EQ(int8.code, 0) << int8.output;
  const auto loss_of = [](const std::string& out) { return std::stod(out.substr(out.find(" loss ") + 6)); };
  EXPECT_NEAR(loss_of(int8.output), loss_of(f32.output), 0.05) << f32.output << int8.output;
  // eval reports a language model as training's evaluation does: the
  // perplexity, and for bytes the bits per byte, of its loss per token.
  const double nats = loss_of(f32.output);
  const size_t ppl = f32.output.find(" perplexity "), bits = f32.output.find(" bits/byte ");
  ASSERT_NE(ppl, std::string::npos) << f32.output;
  ASSERT_NE(bits, std::string::npos) << f32.output;
  EXPECT_NEAR(std::stod(f32.output.substr(ppl + 12)), std::exp(nats), 1e-4 * std::exp(nats)) << f32.output;
  EXPECT_NEAR(std::stod(f32.output.substr(bits + 11)), nats / std::log(2.0), 1e-4) << f32.output;
  // The file holds out validation data only: eval's default split (test)
  // is refused with the splits there are, and a split that does not exist
  // anywhere with the ones eval knows.
  CliRun no_test = tandem("eval " + m + " --weights " + dir.file("run") + " --device onednn");
  EXPECT_EQ(no_test.code, 2) << no_test.output;
  EXPECT_HAS(no_test.output,
             m + ": the model file has no 'test' data; it has train, validation (pick one with --split)");
  CliRun bad_split = tandem("eval " + m + " --weights " + dir.file("run") + " --split dev");
  EXPECT_EQ(bad_split.code, 2) << bad_split.output;
  EXPECT_HAS(bad_split.output, "--split must be test, validation or train, got 'dev'");
  CliRun q_text = tandem("generate " + m + " --weights " + dir.file("q8") + " --device onednn --tokens 10");
  ASSERT_EQ(q_text.code, 0) << q_text.output;
  EXPECT_HAS(q_text.output, "(int8)");
  // The token embedding and the tied head pinned to one device, the blocks
  // placed on the other: plan counts the copies between them, and it trains.
  std::string pinned = read_file(m);
  pinned.replace(pinned.find("embedding_dim = 32"), 18, "embedding_dim = 32\ndevice = \"reference\"");
  pinned.replace(pinned.find("tie_weight = \"tok\""), 18, "tie_weight = \"tok\"\ndevice = \"reference\"");
  const std::string pm = model(pinned, "pinned.toml");
  // Pinned placement: the unpinned blocks go to the run's device (onednn:0).
  CliRun plan2 = tandem("plan " + pm + " --device onednn:0,reference:0 --placement pinned");
  ASSERT_EQ(plan2.code, 0) << plan2.output;
  EXPECT_HAS(plan2.output, "(layer 'tok' -> 'pos', forward)");
  EXPECT_HAS(plan2.output, "-> 'head', forward)");
  CliRun placed = tandem("train " + pm + " --device onednn:0,reference:0 --placement pinned --run-dir " +
                         dir.file("placed"));
  EXPECT_EQ(placed.code, 0) << placed.output;
  CliRun none = tandem("generate " + m + " --weights " + dir.file("run") + " --tokens 0");
  EXPECT_EQ(none.code, 2) << none.output;
  EXPECT_HAS(none.output, "--tokens");
}

}  // namespace
}  // namespace tandem::test
