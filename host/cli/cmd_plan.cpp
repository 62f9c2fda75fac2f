// `tandem plan MODEL.toml`: where a training run would put every layer, the
// memory each device would need against its budget, and the copies between
// devices per step — without training or allocating device memory.
#include <iostream>
#include <string>

#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"
#include "cli/memory_budget.hpp"
#include "cli/model_option.hpp"
#include "program/device_select.hpp"
#include "program/process_group.hpp"
#include "train/trainer.hpp"

namespace tandem::cli {
namespace {

int run_plan(const std::vector<std::string>& args, GlobalOptions globals) {
  po::options_description options("Options");
  options.add_options()("model", po::value<std::string>(), "model file (TOML)")(
      "set", po::value<std::vector<std::string>>()->composing(), "override a model-file key (as for train)");
  add_feature_option(options);
  options.add_options()(
      "device", po::value<std::string>()->default_value(""),
      "default device of unpinned layers: cuda:0, onednn:0, reference:0, cpu, gpu; a list (cuda:0,cpu) "
      "lets layers go to the other devices too")(
      "threads", po::value<int>()->default_value(0),
      "compute threads for CPU backends, as for train (the measured costs depend on it)")(
      "memory-budget", po::value<std::string>(),
      "bytes each device may hold, e.g. onednn:0=2GiB,reference:0=512MiB")(
      "placement", po::value<std::string>(), "auto, pinned or strict (as for train)")(
      "no-prefetch", po::bool_switch(), "plan for train --no-prefetch (no second input buffers)")(
      "ranks", po::value<int>(),
      "plan one rank of a run over this many processes (mpirun -np N): layers marked `parallel` split "
      "N ways, the others whole on every rank with its own batch (default: the launcher's ranks, else 1)")(
      "recalibrate", po::bool_switch(),
      "measure the op and copy costs again instead of reading them from the cache (~/.cache/tandem/costs)");
  add_streaming_options(options);
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map vm;
  if (auto stop = parse_command_options("plan", "MODEL.toml", args, options, positional, vm, globals))
    return *stop;
  if (!vm.count("model")) {
    print_error("plan needs a model file: tandem plan MODEL.toml (see tandem plan --help)");
    return kExitUsage;
  }
  int exit_code = 0;
  auto spec = read_model_option(vm, exit_code);
  if (!spec) return exit_code;
  host::program::ProcessGroup group = host::program::detect_process_group();
  if (vm.count("ranks")) {
    const int ranks = vm["ranks"].as<int>();
    if (ranks < 1) {
      print_error("--ranks must be at least 1, got " + std::to_string(ranks));
      return kExitUsage;
    }
    // Rank 0 stands for every rank: the slices are of equal size.
    group = {0, ranks, 0, 0, ""};
  } else if (group.rank != 0) {
    return kExitOk;  // under a launcher every rank's plan is rank 0's: it alone plans and prints
  }
  std::unique_ptr<PluginSession> session = load_plugins(globals, threads_config(vm["threads"].as<int>()));
  auto device =
      host::program::select_device(*session->registry, primary_device(vm["device"].as<std::string>()));
  if (!device) {
    print_error(device.error().message);
    return kExitPlugin;
  }
  host::train::TrainOptions train;
  train.prefetch = !vm["no-prefetch"].as<bool>();
  if (auto r = apply_placement_options(vm, *session->registry, *spec, train); !r) {
    print_error(r.error().message);
    return kExitUsage;
  }
  host::program::ProgramOptions program_options = host::train::program_options(train);
  program_options.group = group;
  // The program `tandem train` would build with these options, not allocated.
  auto program = host::program::Program::build(*spec, *device, *session->registry, program_options);
  if (!program) {
    print_error(program.error().message);
    return exit_code_for(program.error());
  }
  if (auto r = (*program)->write_plan(std::cout); !r) {
    print_error(r.error().message);
    return exit_code_for(r.error());
  }
  if (auto r = (*program)->check_evaluation(); !r) {
    print_error(r.error().message);
    return exit_code_for(r.error());
  }
  return kExitOk;
}

const bool registered = register_command(
    {"plan", "Show where each layer would run, the memory per device and the copies, without training",
     run_plan});

}  // namespace
}  // namespace tandem::cli
