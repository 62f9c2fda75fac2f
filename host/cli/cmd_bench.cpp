// `tandem bench MODEL.toml`: training throughput with pre-loaded data (see
// train/benchmark.hpp for what is timed). bench/run.sh compares it with
// PyTorch doing the same work.
#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"
#include "cli/memory_budget.hpp"
#include "cli/model_option.hpp"
#include "program/device_select.hpp"
#include "train/benchmark.hpp"
#include "util/format.hpp"

namespace tandem::cli {
namespace {

std::string fixed(double x, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << x;
  return s.str();
}

// The slowest nodes of a profiled step, the way `caffe time` lists layers:
// which layer's forward or gradient the time goes to.
void print_slowest_nodes(const host::train::BenchResult& r, size_t count) {
  count = std::min(count, r.node_times.size());
  if (count == 0) return;
  size_t width = 4;
  for (size_t i = 0; i < count; ++i) width = std::max(width, r.node_times[i].name.size());
  std::cout << "  slowest " << count << " of " << r.node_times.size() << " nodes, per step:\n";
  for (size_t i = 0; i < count; ++i) {
    const host::train::NodeTime& t = r.node_times[i];
    std::cout << "    " << std::left << std::setw(int(width)) << t.name << "  " << std::setw(26) << t.op
              << std::right << std::setw(10) << fixed(t.ms_per_step, 3) << " ms";
    if (t.gflops > 0) std::cout << "  " << fixed(t.gflops, 1) << " GFLOP/s";
    if (t.m > 0) std::cout << "  " << t.m << " x " << t.n << " x " << t.k;
    std::cout << "\n";
  }
}

// "  features    amp (dtype=f16), grad_accum (micro_batch=8)\n", or nothing
// without feature plugins.
std::string features_line(const host::train::BenchResult& r) {
  if (r.features.empty()) return "";
  std::string line = "  features    ";
  for (const auto& [name, settings] : r.features) {
    if (line.back() != ' ') line += ", ";
    line += name;
    std::string keys;
    for (const auto& [key, value] : settings) keys += (keys.empty() ? "" : ", ") + key + "=" + value;
    if (!keys.empty()) line += " (" + keys + ")";
  }
  return line + "\n";
}

po::options_description bench_options() {
  po::options_description options("Options");
  options.add_options()("model", po::value<std::string>(), "model file (TOML)")(
      "set", po::value<std::vector<std::string>>()->composing(),
      "override a model-file key: --set train.batch_size=256 (repeatable)");
  add_feature_option(options);
  options.add_options()(
      "device", po::value<std::string>()->default_value(""),
      "device to run on: onednn:0, cuda:0, reference:0, cpu, gpu (default: the fastest available)")(
      "threads", po::value<int>()->default_value(0),
      "compute threads for CPU backends (0: the backend's default)")(
      "steps", po::value<int64_t>()->default_value(50), "training steps per timed repeat")(
      "warmup", po::value<int64_t>()->default_value(10), "untimed training steps before the repeats")(
      "repeats", po::value<int64_t>()->default_value(5), "timed repeats (the median is reported)")(
      "profile", po::bool_switch(),
      "time every node (one synchronisation per node): time per op type and the GEMM ops' GFLOP/s")(
      "memory-budget", po::value<std::string>(), "bytes each device may hold, as for train")(
      "profile-nodes", po::value<int64_t>()->default_value(0),
      "with the profile (implies --profile), also the N slowest nodes: name, op, time per step, and "
      "a matmul-family node's GFLOP/s (and a matrix product's M x N x K)")(
      "json", po::value<std::string>(), "also write the result as JSON to this file");
  add_streaming_options(options);
  return options;
}

// What the options ask of the benchmark; an error is a usage error.
host::Result<host::train::BenchOptions> bench_settings(const po::variables_map& vm,
                                                       const host::PluginRegistry& registry) {
  const int64_t slowest = vm["profile-nodes"].as<int64_t>();
  if (slowest < 0)
    return host::make_error("bench: --profile-nodes must be 0 or more, got " + std::to_string(slowest),
                            TDM_INVALID_ARGUMENT);
  host::train::BenchOptions bench{.steps = vm["steps"].as<int64_t>(),
                                  .warmup = vm["warmup"].as<int64_t>(),
                                  .repeats = vm["repeats"].as<int64_t>(),
                                  .profile = vm["profile"].as<bool>() || slowest > 0};
  auto streaming = stream_choice(vm);
  if (!streaming) return streaming.error();
  bench.streaming = *streaming;
  auto depth = stream_depth(vm);
  if (!depth) return depth.error();
  bench.stream_depth = *depth;
  if (vm.count("memory-budget")) {
    auto budgets = parse_memory_budget(vm["memory-budget"].as<std::string>(), registry);
    if (!budgets) return budgets.error();
    bench.memory_budgets = std::move(*budgets);
  }
  return bench;
}

void print_result(const host::train::BenchResult& r, const std::string& model_path, int threads,
                  size_t slowest) {
  const std::string thread_text =
      threads > 0 ? std::to_string(threads)
                  : "backend default (" + std::to_string(std::thread::hardware_concurrency()) + " cores)";
  std::cout << "bench " << r.model << " (" << model_path << ") on " << r.device << ", threads " << thread_text
            << ", batch " << r.batch << ", " << r.parameters << " parameters\n"
            << features_line(r) << "  " << r.warmup << " warm-up steps, " << r.samples_per_second.size()
            << " repeats of " << r.steps << " steps (data pre-loaded)\n"
            << "  samples/s   median " << fixed(r.median, 1) << "  min " << fixed(r.min, 1) << "  max "
            << fixed(r.max, 1) << "\n"
            << "  step        " << fixed(r.step_ms, 3) << " ms\n"
            << "  effective   " << fixed(r.effective_gflops(), 1)
            << (r.tokens_per_sample > 1 ? " GFLOP/s (6 x parameters x tokens/s)\n"
                                        : " GFLOP/s (6 x parameters x samples/s)\n")
            << "  peak RSS    " << host::human_bytes(r.peak_rss_bytes) << " (device peak "
            << host::human_bytes(r.device_peak_bytes) << ", planned " << host::human_bytes(r.planned_bytes)
            << (r.device_reported_bytes > 0
                    ? ", the device reports " + host::human_bytes(r.device_reported_bytes) + " in use"
                    : std::string())
            << ")\n"
            << "  last loss   " << r.last_loss << std::endl;
  if (r.op_times.empty()) return;
  std::cout << "  profiled (synchronised after every node); per step:\n"
            << "  matmul-family ops  " << fixed(r.gemm_ms_per_step, 3) << " ms, " << fixed(r.gemm_gflops, 1)
            << " GFLOP/s (2·M·N·K over their own time)\n";
  for (const auto& t : r.op_times)
    std::cout << "    " << std::left << std::setw(28) << t.op << std::right << std::setw(10)
              << fixed(t.ms_per_step, 3) << " ms  (" << t.nodes << " nodes)\n";
  print_slowest_nodes(r, slowest);
  std::cout << std::flush;
}

int run_bench(const std::vector<std::string>& args, GlobalOptions globals) {
  po::options_description options = bench_options();
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map vm;
  if (auto stop = parse_command_options("bench", "MODEL.toml", args, options, positional, vm, globals))
    return *stop;
  if (!vm.count("model")) {
    print_error("bench needs a model file: tandem bench MODEL.toml (see tandem bench --help)");
    return kExitUsage;
  }
  int exit_code = 0;
  auto spec = read_model_option(vm, exit_code);
  if (!spec) return exit_code;
  const int threads = vm["threads"].as<int>();
  std::unique_ptr<PluginSession> session = load_plugins(globals, threads_config(threads));
  auto device = host::program::select_device(*session->registry, vm["device"].as<std::string>());
  if (!device) {
    print_error(device.error().message);
    return kExitPlugin;
  }
  auto bench = bench_settings(vm, *session->registry);
  if (!bench) {
    print_error(bench.error().message);
    return kExitUsage;
  }
  auto result = host::train::run_benchmark(*spec, *device, *session->registry, *bench);
  if (!result) {
    print_error(result.error().message);
    return exit_code_or(result.error(),
                        result.error().status == TDM_INVALID_ARGUMENT ? kExitInput : kExitRuntimeFailure);
  }
  const auto slowest = static_cast<size_t>(vm["profile-nodes"].as<int64_t>());
  print_result(*result, vm["model"].as<std::string>(), threads, slowest);
  if (vm.count("json")) {
    std::ofstream out(vm["json"].as<std::string>());
    out << host::train::bench_json(*result, threads, slowest) << "\n";
    if (!out) {
      print_error("cannot write " + vm["json"].as<std::string>());
      return kExitRuntimeFailure;
    }
  }
  return kExitOk;
}

const bool registered =
    register_command({"bench", "Measure training throughput with pre-loaded data", run_bench});

}  // namespace
}  // namespace tandem::cli
