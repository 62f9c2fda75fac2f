#include "cli/memory_budget.hpp"

#include <sstream>

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
  train.cost_context = "threads=" + std::to_string(vm.count("threads") ? vm["threads"].as<int>() : 0);
  train.recalibrate = vm.count("recalibrate") > 0 && vm["recalibrate"].as<bool>();
  if (vm.count("stream-params")) train.stream_params = vm["stream-params"].as<bool>();
  if (vm.count("stream-depth")) {
    const int depth = vm["stream-depth"].as<int>();
    if (depth < 1 || depth > 64)
      return host::make_error("--stream-depth must be 1 to 64 layers ahead, got " + std::to_string(depth),
                              TDM_INVALID_ARGUMENT);
    train.stream_depth = static_cast<size_t>(depth);
  }
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
