// `tandem bench`: training throughput of a model on one device, measured
// the way bench/torch_peer.py measures PyTorch.
//
// The program is the one `tandem train` runs (program/program.hpp: the
// model file's feature plugins, their passes, placement), initialised with
// the model's initialisers, and a step is the one train runs
// (program/step_runner.hpp: per-step inputs, hooks, clipping). One batch of
// synthetic data of the model's input shape is written into the executor
// once, so a timed step does no batch copy; its per-step inputs (learning
// rate, at [train] lr: the schedule is not what is measured, AdamW's step
// counter, dropout's seed) are written as `tandem train` writes them. The
// loss is read once at the end of each repeat, to be sure the work happened
// and stayed finite.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "device/device.hpp"
#include "model/model_spec.hpp"
#include "plugin/registry.hpp"
#include "program/program.hpp"
#include "util/result.hpp"

namespace tandem::host::train {

struct BenchOptions {
  int64_t steps = 50;   // training steps per timed repeat
  int64_t warmup = 10;  // untimed steps before the first repeat
  int64_t repeats = 5;  // timed repeats; the median is reported
  // Synchronise after every node and time it (ExecutorOptions::profile):
  // gives time per op type and the GEMM-family ops' own GFLOP/s, at the cost
  // of one stream synchronisation per node in the timed steps.
  bool profile = false;
  // As train's --stream-params or --no-stream, --stream-depth, --memory-budget.
  program::StreamChoice streaming = program::StreamChoice::Auto;
  size_t stream_depth = 1;
  std::map<std::string, uint64_t> memory_budgets;
};

struct OpTime {
  std::string op;
  double ms_per_step = 0;
  int64_t nodes = 0;
};

// One node of the profiled step: its name (the layer's, with what autodiff
// or a pass added: h.0.fc.rows.grad_weight), op, time, and for the
// matmul-family ops their 2·M·N·K FLOP over that time (0 for the others).
struct NodeTime {
  std::string name;
  std::string op;
  double ms_per_step = 0;
  double gflops = 0;
  // A matrix-product node's M x N x K (the op table's ProductFn); 0 for
  // other ops. bench/products.py groups the products by it.
  int64_t m = 0, n = 0, k = 0;
};

struct BenchResult {
  std::string model;
  std::string device;
  // The feature plugins the benchmark ran with ([features.NAME] or --feature),
  // by name, each with its settings as given.
  std::map<std::string, std::map<std::string, std::string>> features;
  int64_t batch = 0;
  int64_t parameters = 0;         // trained elements
  int64_t tokens_per_sample = 1;  // a language model's context: each sample is that many tokens
  int64_t steps = 0;
  int64_t warmup = 0;
  std::vector<double> samples_per_second;  // one per repeat
  double median = 0, min = 0, max = 0;     // samples/s
  double step_ms = 0;                      // at the median
  double last_loss = 0;
  uint64_t weights_fingerprint = 0;  // FNV-1a of every parameter's bytes after the last step
  uint64_t peak_rss_bytes = 0;       // getrusage(RUSAGE_SELF).ru_maxrss, the whole process
  uint64_t device_peak_bytes = 0;    // the device allocator's peak (memory_stats)
  uint64_t planned_bytes = 0;        // the planner's estimate
  // What the device says is in use after the timed steps (DeviceHandle::
  // reported_use: on a GPU, cudaMemGetInfo's count since the device was
  // opened); 0 where its memory is the machine's.
  uint64_t device_reported_bytes = 0;
  // Streamed parameters (--stream-params): bytes each timed step moved
  // between host memory and the device, both ways, and the share of the
  // copies' time compute hid.
  uint64_t streamed_bytes_per_step = 0;
  double stream_hidden = 0;
  // With BenchOptions::profile: time per op type (largest first), and the
  // matmul-family ops (linear, linear_grad_input, linear_grad_weight, matmul):
  // 2·M·N·K FLOP each over their measured time.
  std::vector<OpTime> op_times;
  std::vector<NodeTime> node_times;  // every node, largest time first
  double gemm_gflops = 0;
  double gemm_ms_per_step = 0;
  // 6 x parameters x samples/s (the usual training FLOP count of dense
  // layers: 2 forward + 4 backward per weight and sample, or per token of a
  // language model's sample), in GFLOP/s.
  double effective_gflops() const {
    return 6.0 * static_cast<double>(parameters) * median * static_cast<double>(tokens_per_sample) * 1e-9;
  }
};

Result<BenchResult> run_benchmark(const model::ModelSpec& spec, const DeviceHandle& device,
                                  const PluginRegistry& registry, const BenchOptions& options);

// The result as one JSON object (the same keys bench/torch_peer.py writes),
// with the first `slowest_nodes` of node_times as "slowest_nodes".
std::string bench_json(const BenchResult& result, int threads, size_t slowest_nodes = 0);

}  // namespace tandem::host::train
