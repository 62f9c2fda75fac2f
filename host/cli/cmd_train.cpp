// `tandem train MODEL.toml`: train a model from its model file.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"
#include "cli/memory_budget.hpp"
#include "cli/model_option.hpp"
#include "cli/signals.hpp"
#include "model/model_parser.hpp"
#include "program/device_select.hpp"
#include "program/parallel_layout.hpp"
#include "train/checkpointing.hpp"
#include "train/distributed.hpp"
#include "train/sharded_checkpoint.hpp"
#include "train/trainer.hpp"

namespace tandem::cli {
namespace {

std::string default_run_dir(const std::string& model_path) {
  return (std::filesystem::path("runs") / std::filesystem::path(model_path).stem()).string();
}

po::options_description train_options() {
  po::options_description options("Options");
  options.add_options()("model", po::value<std::string>(), "model file (TOML)")(
      "set", po::value<std::vector<std::string>>()->composing(),
      "override a model-file key: --set train.lr=0.1 (repeatable)");
  add_feature_option(options);
  options.add_options()(
      "device", po::value<std::string>()->default_value(""),
      "device to train on: cuda:0, onednn:0, reference:0, cpu, gpu (default: the fastest available); a list "
      "(cuda:0,cpu) lets layers go to the other devices too (--placement auto)")(
      "threads", po::value<int>()->default_value(0),
      "compute threads for CPU backends (0: the backend's default)")(
      "loader-threads", po::value<int>(), "data loader threads (default: [data] threads)")(
      "run-dir", po::value<std::string>(),
      "directory for metrics.jsonl and checkpoints (default: runs/<model name>)")(
      "resume", po::value<std::string>(), "continue a run from its run directory (or a checkpoint file)")(
      "checkpoint-every", po::value<std::string>(),
      "also save a checkpoint every N optimizer steps and/or every so long: 500, \"15min\", \"500 steps, "
      "15min\" (besides each epoch's end and a stop; overrides [train] checkpoint_every)")(
      "keep-checkpoints", po::value<int64_t>(),
      "checkpoints kept in <run-dir>/checkpoints, the newest (default: [train] keep_checkpoints, 3)")(
      "checkpoint-format", po::value<std::string>()->default_value("sharded"),
      "with [train] zero or pipeline_parallel: sharded (each rank writes its shards of the state, each "
      "pipeline stage its layers) or whole (rank 0 gathers one file)")(
      "init-from", po::value<std::string>(),
      "start from the weights of a checkpoint (not its optimizer state)")(
      "profile", po::value<std::string>(), "write a Chrome/Perfetto trace and print time per op type")(
      "tensorboard", po::value<std::string>(),
      "also write the logged figures (train/loss, train/accuracy, lr, samples_per_second, data_wait, "
      "eval/loss, eval/accuracy, ...) as TensorBoard scalars to a new events.out.tfevents.* file in this "
      "directory (created if needed): tensorboard --logdir DIR")(
      "memory-report", po::bool_switch(), "print planned and measured memory after training")(
      "check-numerics", po::bool_switch(),
      "debugging: after every node, stop at the first whose output holds nan or inf, naming it, its "
      "layer and its backend (slow; the loss is always checked)")(
      "poison-outputs", po::bool_switch(),
      "debugging: fill every node's outputs with NaN before it runs, so an output a kernel leaves unwritten "
      "shows (with --check-numerics: at that node)")(
      "check-bounds", po::bool_switch(),
      "debugging: keep a guard after every tensor and stop at the first node that writes past the end of "
      "an output, naming it and its backend (slow)")(
      "recalibrate", po::bool_switch(),
      "automatic placement: measure the op and copy costs again instead of reading the cache")(
      "no-prefetch", po::bool_switch(),
      "copy each batch to the device when its step starts, not during the step before")(
      "comm-timeout", po::value<double>()->default_value(300),
      "data parallelism: seconds a collective may wait for the other ranks before the run stops with an "
      "error naming them")(
      "bucket-mb", po::value<double>()->default_value(4),
      "data parallelism: gradients are all-reduced in buckets of about this many MiB, each as soon as "
      "backward has finished it (0: one gradient per message)")(
      "memory-budget", po::value<std::string>(),
      "bytes each device may hold, e.g. onednn:0=2GiB,reference:0=512MiB: a plan over it is refused before "
      "training, with what would make it fit")(
      "placement", po::value<std::string>(),
      "auto (layers go where the memory budgets and measured costs say; the default with several devices), "
      "pinned (layers run where their `device` says) or strict (and no copy between devices except between "
      "two pinned layers); overrides [train] placement")(
      "comm", po::value<std::string>(),
      "the comm plugin that joins the ranks of a launched run (mpi, nccl, or a third party's); overrides "
      "[train] comm (default: nccl for GPU memory, mpi for host memory)")(
      "rendezvous", po::value<std::string>()->default_value("mpi"),
      "how the ranks exchange a comm plugin's rendezvous id (NCCL's, or another plugin's with "
      "comm_unique_id): mpi (under mpirun/srun) or file:///path (a new file on a file system every rank "
      "sees)");
  add_streaming_options(options);
  return options;
}

// --checkpoint-every and --keep-checkpoints over [train]'s; false after
// printing why.
bool apply_checkpoint_options(const po::variables_map& vm, host::model::ModelSpec& spec) {
  if (vm.count("checkpoint-every")) {
    const std::string text = vm["checkpoint-every"].as<std::string>();
    auto every = host::model::parse_checkpoint_every(text);
    if (!every) {
      print_error("--checkpoint-every: " + every.error().message);
      return false;
    }
    spec.train.checkpoint_every = *every;
  }
  if (vm.count("keep-checkpoints")) {
    const int64_t keep = vm["keep-checkpoints"].as<int64_t>();
    if (keep < 1) {
      print_error("--keep-checkpoints " + std::to_string(keep) + ": keep at least 1");
      return false;
    }
    spec.train.keep_checkpoints = keep;
  }
  return true;
}

// The model file with --set, --feature and --comm applied and the
// checkpoint options checked; nullopt after printing why, with `exit_code` set.
std::optional<host::model::ModelSpec> read_model(const po::variables_map& vm, int& exit_code) {
  auto spec = read_model_option(vm, exit_code);
  if (!spec) return std::nullopt;
  if (!apply_checkpoint_options(vm, *spec)) {
    exit_code = kExitUsage;
    return std::nullopt;
  }
  if (vm.count("comm")) spec->train.comm = vm["comm"].as<std::string>();
  return std::move(*spec);
}

// The run's options from the command line (placement options excepted:
// they need the plugins); nullopt after printing why.
std::optional<host::train::TrainOptions> run_options(const po::variables_map& vm,
                                                     const host::model::ModelSpec& spec) {
  host::train::TrainOptions train;
  train.resume = vm.count("resume") ? vm["resume"].as<std::string>() : "";
  train.init_from = vm.count("init-from") ? vm["init-from"].as<std::string>() : "";
  train.run_dir = vm.count("run-dir") ? vm["run-dir"].as<std::string>()
                  : (!train.resume.empty() && std::filesystem::is_directory(train.resume) &&
                     !host::train::is_sharded_checkpoint(train.resume))
                      ? train.resume
                      : default_run_dir(vm["model"].as<std::string>());
  if (train.resume.empty() && host::train::latest_checkpoint(train.run_dir)) {
    print_error(train.run_dir + " already holds checkpoints of an earlier run; continue it with --resume " +
                train.run_dir + ", or choose another --run-dir (nothing was overwritten)");
    return std::nullopt;
  }
  if (vm["bucket-mb"].as<double>() < 0) {
    print_error("--bucket-mb must be 0 or more");
    return std::nullopt;
  }
  train.profile = vm.count("profile") ? vm["profile"].as<std::string>() : "";
  train.tensorboard = vm.count("tensorboard") ? vm["tensorboard"].as<std::string>() : "";
  train.memory_report = vm["memory-report"].as<bool>();
  train.check_numerics = vm["check-numerics"].as<bool>();
  train.poison_outputs = vm["poison-outputs"].as<bool>();
  train.check_bounds = vm["check-bounds"].as<bool>();
  train.prefetch = !vm["no-prefetch"].as<bool>();
  train.live_progress = ::isatty(STDOUT_FILENO) != 0;
  train.loader_threads =
      vm.count("loader-threads") ? vm["loader-threads"].as<int>() : static_cast<int>(spec.data.threads);
  train.comm_timeout_seconds = vm["comm-timeout"].as<double>();
  train.bucket_bytes = static_cast<size_t>(vm["bucket-mb"].as<double>() * 1024 * 1024);
  train.rendezvous = vm["rendezvous"].as<std::string>();
  train.checkpoint_format = vm["checkpoint-format"].as<std::string>();
  if (train.checkpoint_format != "sharded" && train.checkpoint_format != "whole") {
    print_error("--checkpoint-format " + train.checkpoint_format + ": expected sharded or whole");
    return std::nullopt;
  }
  return train;
}

void print_start(const host::model::ModelSpec& spec, const std::string& device,
                 const host::program::ProcessGroup& group, const host::program::ParallelLayout& layout,
                 const std::string& run_dir) {
  const std::string ranks = std::to_string(group.world) + " ranks (" + group.launcher + ")";
  std::string split;
  if (layout.pipeline > 1)
    split =
        (layout.data > 1 ? " per pipeline x " + std::to_string(layout.data) + " pipelines" : std::string()) +
        ", layers in " + std::to_string(layout.pipeline) + " pipeline stages" +
        (layout.tensor > 1
             ? ", parallel layers split over the " + std::to_string(layout.tensor) + " ranks of each stage"
             : std::string()) +
        ": a grid of data " + std::to_string(layout.data) + " x tensor " + std::to_string(layout.tensor) +
        " x pipeline " + std::to_string(layout.pipeline) + ", " + ranks;
  else if (layout.tensor > 1 && layout.data > 1)
    split = " per group x " + std::to_string(layout.data) + " groups, parallel layers split over the " +
            std::to_string(layout.tensor) + " ranks of each: " + ranks;
  else if (layout.tensor > 1)
    split = ", parallel layers split over " + ranks;
  else if (group.world > 1)
    split = " per rank x " + ranks;
  std::cout << "training " << spec.name << " (" << spec.path << ") on " << device << ", batch "
            << spec.train.batch_size << split << ", run directory " << run_dir;
  if (spec.train.checkpoint_every.any())
    std::cout << ", checkpoints " << describe(spec.train.checkpoint_every) << " (last "
              << spec.train.keep_checkpoints << " kept)";
  std::cout << std::endl;
}

void print_result(const host::train::TrainResult& result) {
  if (result.validation_accuracy)
    std::cout << "validation accuracy " << *result.validation_accuracy << std::endl;
  if (result.test_accuracy) std::cout << "test accuracy " << *result.test_accuracy << std::endl;
  std::cout << "trained " << result.steps << " steps in " << result.seconds << " s; last checkpoint "
            << result.last_checkpoint << std::endl;
}

// A training run that failed. A rank of several may fail alone (its disk,
// its --tensorboard directory) while the others wait in a collective, and
// tearing down the comm plugin (MPI_Finalize) would wait on them in turn:
// ending the process at once lets the launcher end the job, instead of
// every rank waiting out --comm-timeout. Checkpoints already written stay.
int run_failed(const host::Error& error, const host::program::ProcessGroup& group) {
  print_error(error.message);
  if (group.world > 1) {
    std::fflush(nullptr);
    std::_Exit(exit_code_for(error));
  }
  return exit_code_for(error);
}

int run_train(const std::vector<std::string>& args, GlobalOptions globals) {
  po::options_description options = train_options();
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map vm;
  if (auto stop = parse_command_options("train", "MODEL.toml", args, options, positional, vm, globals))
    return *stop;
  if (!vm.count("model")) {
    print_error("train needs a model file: tandem train MODEL.toml (see tandem train --help)");
    return kExitUsage;
  }
  if (vm.count("resume") && vm.count("init-from")) {
    print_error(
        "--resume and --init-from exclude each other: --resume continues a run, --init-from starts a new "
        "one");
    return kExitUsage;
  }
  int exit_code = kExitOk;
  auto spec = read_model(vm, exit_code);
  if (!spec) return exit_code;
  auto train = run_options(vm, *spec);
  if (!train) return kExitUsage;
  SignalRequests signals;
  train->stop = &signals.stop;
  train->status_request = &signals.status;

  std::unique_ptr<PluginSession> session = load_plugins(globals, threads_config(vm["threads"].as<int>()));
  const host::program::ProcessGroup group = host::program::detect_process_group();
  auto device =
      host::program::select_device(*session->registry, primary_device(vm["device"].as<std::string>()), group);
  if (!device) {
    print_error(device.error().message);
    return kExitPlugin;
  }
  if (auto r = apply_placement_options(vm, *session->registry, *spec, *train); !r) {
    print_error(r.error().message);
    return kExitUsage;
  }
  auto layout = host::program::parallel_layout(*spec, group);
  if (!layout) {
    print_error(layout.error().message);
    return kExitUsage;
  }
  const bool leader = group.rank == 0;  // the other ranks of a parallel run stay quiet
  if (leader) print_start(*spec, device->id(), group, *layout, train->run_dir);
  auto trainer = host::train::Trainer::create(*spec, *device, *session->registry, *train);
  if (!trainer) return run_failed(trainer.error(), group);
  arm_signals(&signals);
  auto result = (*trainer)->run();
  arm_signals(nullptr);
  if (!result) return run_failed(result.error(), group);
  if (leader) print_result(*result);
  // The shell's convention: 128 + the signal (130 for Ctrl-C, 143 for SIGTERM).
  return result->interrupted ? 128 + signals.stop_signal.load() : kExitOk;
}

const bool registered = register_command({"train", "Train a model from its model file", run_train});

}  // namespace
}  // namespace tandem::cli
