#include "cli/memory_budget.hpp"

#include <algorithm>
#include <sstream>
#include <vector>

#include "program/device_select.hpp"
#include "tandem/byte_size.hpp"

namespace tandem::cli {
namespace {

host::Result<uint64_t> parse_size(const std::string& text) {
  if (auto bytes = tandem::parse_byte_size(text)) return *bytes;
  return host::make_error("'" + text + "' is not a size (a positive number with B, KiB, MiB or GiB)",
                          TDM_INVALID_ARGUMENT);
}

}  // namespace

host::Result<std::map<std::string, uint64_t>> parse_memory_budget(const std::string& text,
                                                                  const host::PluginRegistry& registry) {
  std::map<std::string, uint64_t> budgets;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      return host::make_error(
          "--memory-budget " + text + ": '" + item + "' is not DEVICE=SIZE (e.g. onednn:0=2GiB)",
          TDM_INVALID_ARGUMENT);
    auto device = host::program::select_device(registry, item.substr(0, eq));
    if (!device)
      return host::make_error("--memory-budget " + text + ": " + device.error().message,
                              device.error().status);
    auto size = parse_size(item.substr(eq + 1));
    if (!size)
      return host::make_error("--memory-budget " + text + ": " + size.error().message, size.error().status);
    budgets[device->id()] = *size;
  }
  return budgets;
}

std::string primary_device(const std::string& device_list) {
  return device_list.substr(0, device_list.find(','));
}

void add_streaming_options(boost::program_options::options_description& options) {
  namespace po = boost::program_options;
  options.add_options()(
      "stream-params", po::bool_switch(),
      "keep every layer's parameters, gradients and optimizer state in host memory and stream them through "
      "the device around the nodes that use them (by default only a run that does not fit its device "
      "streams, the fewest layers that make it fit; a layer's `stream` in the model file decides for it)")(
      "no-stream", po::bool_switch(), "never stream: every layer's state stays on its device")(
      "stream-depth", po::value<int>()->default_value(1),
      "with streaming: how many layers ahead a streamed tensor is fetched (1 to 64)");
}

host::Result<host::program::StreamChoice> stream_choice(const boost::program_options::variables_map& vm) {
  const bool every = vm.count("stream-params") > 0 && vm["stream-params"].as<bool>();
  const bool none = vm.count("no-stream") > 0 && vm["no-stream"].as<bool>();
  if (every && none)
    return host::make_error("--stream-params streams every layer and --no-stream none: give one of them",
                            TDM_INVALID_ARGUMENT);
  return every  ? host::program::StreamChoice::Every
         : none ? host::program::StreamChoice::None
                : host::program::StreamChoice::Auto;
}

host::Result<size_t> stream_depth(const boost::program_options::variables_map& vm) {
  const int depth = vm.count("stream-depth") ? vm["stream-depth"].as<int>() : 1;
  if (depth < 1 || depth > 64)
    return host::make_error("--stream-depth must be 1 to 64 layers ahead, got " + std::to_string(depth),
                            TDM_INVALID_ARGUMENT);
  return static_cast<size_t>(depth);
}

host::Result<void> apply_placement_options(const boost::program_options::variables_map& vm,
                                           const host::PluginRegistry& registry, host::model::ModelSpec& spec,
                                           host::train::TrainOptions& train) {
  if (vm.count("memory-budget")) {
    auto budgets = parse_memory_budget(vm["memory-budget"].as<std::string>(), registry);
    if (!budgets) return budgets.error();
    train.memory_budgets = std::move(*budgets);
  }
  std::stringstream devices(vm["device"].as<std::string>());
  std::string name;
  std::getline(devices, name, ',');  // the run's own device
  while (std::getline(devices, name, ',')) {
    if (name.empty())
      return host::make_error("--device " + vm["device"].as<std::string>() + ": an empty device name",
                              TDM_INVALID_ARGUMENT);
    train.devices.push_back(name);
  }
  // What else changes an op's time: the threads, and the plugins' options
  // (onednn.devices=2 gives each onednn device 1 of the cores, cuda.tf32 ...).
  train.cost_context = "threads=" + std::to_string(vm.count("threads") ? vm["threads"].as<int>() : 0);
  if (vm.count("plugin-option") != 0) {
    std::vector<std::string> options = vm["plugin-option"].as<std::vector<std::string>>();
    std::sort(options.begin(), options.end());
    for (const std::string& option : options) train.cost_context += " " + option;
  }
  train.recalibrate = vm.count("recalibrate") > 0 && vm["recalibrate"].as<bool>();
  auto streaming = stream_choice(vm);
  if (!streaming) return streaming.error();
  train.streaming = *streaming;
  auto depth = stream_depth(vm);
  if (!depth) return depth.error();
  train.stream_depth = *depth;
  if (vm.count("placement")) {
    const std::string placement = vm["placement"].as<std::string>();
    if (placement != "auto" && placement != "pinned" && placement != "strict")
      return host::make_error("--placement must be auto, pinned or strict, got '" + placement + "'",
                              TDM_INVALID_ARGUMENT);
    spec.train.placement = placement;
  }
  return {};
}

}  // namespace tandem::cli
