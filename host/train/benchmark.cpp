#include "train/benchmark.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <variant>

#include "exec/executor.hpp"
#include "exec/tensor_text.hpp"
#include "ops/op_table.hpp"
#include "ops/shapes.hpp"
#include "program/program.hpp"
#include "program/step_runner.hpp"
#include "train/initializers.hpp"
#include "util/fnv1a.hpp"

namespace tandem::host::train {
namespace {

using Clock = std::chrono::steady_clock;

// One batch of N(0, 1) features and uniform labels; for a model that reads
// token ids (a language model, an embedding classifier), uniform ids below
// its first embedding's table size (a language model: next-token labels at
// every position). Kept on the host: a pipelined step writes it into every
// micro-batch in flight.
struct PreloadedBatch {
  std::vector<char> input;
  std::vector<int32_t> labels;
};

// The token ids a model reads (the table size of its first layer, an
// embedding), or 0 for a model of features.
int32_t token_ids(const model::ModelSpec& spec) {
  if (spec.layers.empty() || spec.layers.front().op != "embedding") return 0;
  return static_cast<int32_t>(spec.layers.front().int_attr("num_embeddings", spec.classes));
}

template <class T>
void append(std::vector<char>& bytes, const std::vector<T>& values) {
  bytes.insert(bytes.end(), reinterpret_cast<const char*>(values.data()),
               reinterpret_cast<const char*>(values.data() + values.size()));
}

Result<PreloadedBatch> preload_batch(const lowering::ModelGraph& model, const model::ModelSpec& spec,
                                     exec::Executor& ex) {
  std::mt19937_64 rng(spec.train.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> label(0, static_cast<int32_t>(spec.classes) - 1);
  const int32_t ids = spec.language_model() ? static_cast<int32_t>(spec.classes) : token_ids(spec);
  std::uniform_int_distribution<int32_t> token(0, std::max<int32_t>(ids, 1) - 1);
  const TensorType& type = model.graph.value(model.input)->type;
  const size_t inputs = static_cast<size_t>(ops::numel(type.dims));
  PreloadedBatch b;
  b.labels.resize(static_cast<size_t>(ops::numel(model.graph.value(model.labels)->type.dims)));
  for (int32_t& l : b.labels) l = label(rng);
  if (type.dtype == TDM_S32) {
    std::vector<int32_t> tokens(inputs);
    for (int32_t& t : tokens) t = token(rng);
    append(b.input, tokens);
  } else {  // features, or an embedding classifier's ids as floats (as its data source gives them)
    std::vector<float> features(inputs);
    for (float& f : features) f = ids > 0 ? static_cast<float>(token(rng)) : normal(rng);
    append(b.input, features);
  }
  if (auto r = ex.write(model.input, b.input.data(), b.input.size()); !r) return r.error();
  if (auto r = ex.write(model.labels, b.labels.data(), b.labels.size() * sizeof(int32_t)); !r)
    return r.error();
  return b;
}

// A pipelined program's micro-batches, every one the preloaded batch.
Result<void> pipelined_micro_batches(program::Program& p, const program::StepRunner& steps, int64_t step,
                                     const PreloadedBatch& batch) {
  const uint32_t micro = p.micro_batches();
  std::vector<int64_t> offsets(micro);
  std::vector<std::vector<exec::ConstBytes>> inputs(micro);
  for (uint32_t i = 0; i < micro; ++i) {
    offsets[i] = steps.dropout_offset(step, i);
    inputs[i] =
        p.micro_batch_inputs({batch.input.data(), batch.input.size()},
                             {batch.labels.data(), batch.labels.size() * sizeof(int32_t)}, offsets[i]);
  }
  return p.pipeline()->run_micro_batches(inputs, {}, std::vector<std::vector<exec::MutableBytes>>(micro));
}

// One training step as `tandem train` runs it (program/step_runner.hpp),
// minus the batch copy and the per-step reads of loss and logits: every
// micro-batch's forward and backward on the preloaded batch (pipelined
// where the program pipelines them), then the optimizer phase with the
// feature hooks and clipping.
Result<void> train_step(program::Program& p, program::StepRunner& steps, int64_t step,
                        const PreloadedBatch& batch) {
  exec::Executor& ex = p.executor();
  if (p.pipeline() != nullptr) {
    if (auto r = steps.begin_micro_batch(step, 0, p.spec().train.lr); !r) return r;
    if (auto r = pipelined_micro_batches(p, steps, step, batch); !r) return r;
    for (uint32_t micro = 0; micro < p.micro_batches(); ++micro)
      if (auto r = steps.end_micro_batch(step, micro); !r) return r;
    return steps.optimizer_step(step);
  }
  for (uint32_t micro = 0; micro < p.micro_batches(); ++micro) {
    if (auto r = steps.begin_micro_batch(step, micro, p.spec().train.lr); !r) return r;
    if (auto r = ex.run(0, p.model().optimizer_begin); !r) return r;
    if (auto r = steps.end_micro_batch(step, micro); !r) return r;
  }
  return steps.optimizer_step(step);
}

void summarise_profile(const Graph& g, const exec::Executor& ex, int64_t steps, BenchResult& r) {
  std::map<std::string, OpTime> by_op;
  double gemm_flop = 0, gemm_us = 0;
  for (size_t i = 0; i < ex.node_count(); ++i) {
    const Node& node = *g.node_at(i);
    const double us = ex.node_time_us()[i];
    OpTime& t = by_op[node.op];
    t.op = node.op;
    t.ms_per_step += us * 1e-3 / double(steps);
    ++t.nodes;
    // The op table's FLOP count (matmul, linear and its gradients, attention)
    // and a matrix product's M x N x K; 0 for other ops.
    const ops::OpInfo* info = ops::find(node.op);
    const double f = info != nullptr && info->flops != nullptr ? info->flops(g, node) : 0.0;
    const ops::ProductDims d =
        info != nullptr && info->product != nullptr ? info->product(g, node) : ops::ProductDims{};
    r.node_times.push_back({node.name, node.op, us * 1e-3 / double(steps),
                            f > 0 && us > 0 ? f * double(steps) / (us * 1e3) : 0, d.m, d.n, d.k});
    if (f > 0) {
      gemm_flop += f * double(steps);
      gemm_us += us;
    }
  }
  for (auto& [op, t] : by_op) r.op_times.push_back(t);
  std::sort(r.op_times.begin(), r.op_times.end(),
            [](const OpTime& a, const OpTime& b) { return a.ms_per_step > b.ms_per_step; });
  std::stable_sort(r.node_times.begin(), r.node_times.end(),
                   [](const NodeTime& a, const NodeTime& b) { return a.ms_per_step > b.ms_per_step; });
  r.gemm_ms_per_step = gemm_us * 1e-3 / double(steps);
  r.gemm_gflops = gemm_us > 0 ? gemm_flop / (gemm_us * 1e-6) * 1e-9 : 0;
}

// FNV-1a of every parameter's bytes in model order: two runs that trained
// the same weights bit for bit (streamed or resident) print the same.
Result<uint64_t> weights_fingerprint(const lowering::ModelGraph& model, exec::Executor& ex) {
  uint64_t h = kFnv1aBasis;
  std::vector<char> bytes;
  for (ValueId p : model.parameters) {
    bytes.resize(exec::tensor_bytes(model.graph.value(p)->type));
    if (auto r = ex.read(p, bytes.data(), bytes.size()); !r) return r.error();
    h = fnv1a64({bytes.data(), bytes.size()}, h);
  }
  return h;
}

uint64_t peak_rss() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
}

}  // namespace

Result<BenchResult> run_benchmark(const model::ModelSpec& spec, const DeviceHandle& device,
                                  const PluginRegistry& registry, const BenchOptions& options) {
  if (options.steps < 1 || options.repeats < 1 || options.warmup < 0)
    return make_error("bench: --steps and --repeats must be at least 1, --warmup at least 0",
                      TDM_INVALID_ARGUMENT);
  // The program `tandem train` would run: the same passes and placement.
  program::ProgramOptions program_options;
  program_options.prefetch = false;  // the batch is written once, never staged
  program_options.streaming = options.streaming;
  program_options.stream_depth = options.stream_depth;
  program_options.memory_budgets = options.memory_budgets;
  auto built = program::Program::build(spec, device, registry, std::move(program_options));
  if (!built) return built.error();
  program::Program& p = **built;
  exec::ExecutorOptions exec_options;
  exec_options.outputs = {"loss"};
  exec_options.profile = options.profile;
  if (auto r = p.allocate(exec_options); !r) return r.error();
  const lowering::ModelGraph& model = p.model();
  exec::Executor& ex = p.executor();
  program::StepRunner steps(p);
  if (auto r = initialise_tensors(model, ex, spec.train.seed); !r) return r.error();
  auto preloaded = preload_batch(model, spec, ex);
  if (!preloaded) return preloaded.error();

  BenchResult result;
  result.model = spec.name;
  result.features = spec.features;
  result.device = device.id();
  const int64_t batch = p.micro_batch_samples() * p.micro_batches();  // samples per optimizer step
  result.batch = batch;
  if (spec.language_model()) result.tokens_per_sample = spec.input_shape.at(0);
  result.steps = options.steps;
  result.warmup = options.warmup;
  for (ValueId p : model.parameters) result.parameters += ops::numel(model.graph.value(p)->type.dims);
  int64_t step = 0;
  for (; step < options.warmup; ++step)
    if (auto r = train_step(p, steps, step, *preloaded); !r) return r.error();
  ex.clear_profile();
  for (int64_t repeat = 0; repeat < options.repeats; ++repeat) {
    const auto start = Clock::now();
    for (int64_t i = 0; i < options.steps; ++i, ++step)
      if (auto r = train_step(p, steps, step, *preloaded); !r) return r.error();
    float loss = 0;  // inside the timed span: the device's work is surely done
    if (auto r = ex.read(model.loss, &loss, sizeof loss); !r) return r.error();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!std::isfinite(loss))
      return make_error("bench: the loss became " + std::to_string(loss) + " at step " +
                            std::to_string(step) + "; lower [train] lr for this model",
                        TDM_ABORTED);
    result.last_loss = loss;
    result.samples_per_second.push_back(static_cast<double>(options.steps * batch) / seconds);
  }
  std::vector<double> sorted = result.samples_per_second;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  result.median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  result.min = sorted.front();
  result.max = sorted.back();
  result.step_ms = 1e3 * static_cast<double>(batch) / result.median;
  result.peak_rss_bytes = peak_rss();
  result.device_peak_bytes = ex.measured_peak();
  result.planned_bytes = ex.plan().estimate.total;
  result.device_reported_bytes = device.reported_use().value_or(0);
  auto fingerprint = weights_fingerprint(model, ex);
  if (!fingerprint) return fingerprint.error();
  result.weights_fingerprint = *fingerprint;
  const exec::StreamStats streamed = ex.stream_stats();
  if (streamed.copies > 0) {
    const auto timed = static_cast<uint64_t>(options.warmup + options.steps * options.repeats);
    result.streamed_bytes_per_step = (streamed.fetched_bytes + streamed.written_home_bytes) / timed;
    result.stream_hidden =
        streamed.busy_us > 0 ? 1.0 - std::min(streamed.waited_us, streamed.busy_us) / streamed.busy_us : 0.0;
  }
  if (options.profile) summarise_profile(model.graph, ex, options.steps * options.repeats, result);
  return result;
}

std::string bench_json(const BenchResult& r, int threads, size_t slowest_nodes) {
  nlohmann::json j;
  j["framework"] = "tandem";
  j["model"] = r.model;
  j["device"] = r.device;
  j["features"] = r.features;
  j["threads"] = threads;
  j["batch"] = r.batch;
  j["tokens_per_sample"] = r.tokens_per_sample;
  j["parameters"] = r.parameters;
  j["steps"] = r.steps;
  j["warmup"] = r.warmup;
  j["repeats"] = r.samples_per_second.size();
  j["samples_per_second"] = r.samples_per_second;
  j["median_samples_per_second"] = r.median;
  j["min_samples_per_second"] = r.min;
  j["max_samples_per_second"] = r.max;
  j["step_ms"] = r.step_ms;
  j["effective_gflops"] = r.effective_gflops();
  j["last_loss"] = r.last_loss;
  j["weights_fnv1a"] = hex64(r.weights_fingerprint);
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  j["device_peak_bytes"] = r.device_peak_bytes;
  j["planned_bytes"] = r.planned_bytes;
  if (r.device_reported_bytes > 0) j["device_reported_bytes"] = r.device_reported_bytes;
  if (r.streamed_bytes_per_step > 0) {
    j["streamed_bytes_per_step"] = r.streamed_bytes_per_step;
    j["stream_hidden_fraction"] = r.stream_hidden;
  }
  if (!r.op_times.empty()) {
    j["profiled"] = true;
    j["gemm_gflops"] = r.gemm_gflops;
    j["gemm_ms_per_step"] = r.gemm_ms_per_step;
    for (const OpTime& t : r.op_times) j["op_ms_per_step"][t.op] = t.ms_per_step;
    for (size_t i = 0; i < std::min(slowest_nodes, r.node_times.size()); ++i) {
      const NodeTime& t = r.node_times[i];
      nlohmann::json node{{"name", t.name}, {"op", t.op}, {"ms_per_step", t.ms_per_step}};
      if (t.gflops > 0) node["gflops"] = t.gflops;
      if (t.m > 0) node["mnk"] = {t.m, t.n, t.k};
      j["slowest_nodes"].push_back(node);
    }
  }
  return j.dump(2);
}

}  // namespace tandem::host::train
