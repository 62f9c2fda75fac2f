// `tandem devices`: every device of every backend plugin, with its memory and
// what its kernels can use (the CPU's instruction sets, a GPU's architecture).
#include <iostream>

#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"
#include "device/device.hpp"
#include "util/format.hpp"

namespace tandem::cli {
namespace {

int run_devices(const std::vector<std::string>& args, GlobalOptions globals) {
  po::options_description options("Options");
  po::variables_map vm;
  if (auto stop = parse_command_options("devices", "", args, options, {}, vm, globals)) return *stop;

  std::unique_ptr<PluginSession> session = load_plugins(globals);
  if (session->registry->by_kind(TDM_PLUGIN_BACKEND).empty()) {
    print_error(
        "no backend plugin could be loaded; run 'tandem plugins -v' to see where Tandem looked and why");
    return kExitPlugin;
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> absent;
  for (const host::BackendDevices& backend : host::enumerate_devices(*session->registry)) {
    for (const host::DeviceInfo& d : backend.devices)
      rows.push_back({d.id, d.backend, d.kind == TDM_DEVICE_GPU ? "gpu" : "cpu",
                      host::human_bytes(d.total_memory), host::human_bytes(d.free_memory),
                      d.features.empty() ? "-" : d.features, d.name});
    if (!backend.no_device_reason.empty())
      absent.push_back(backend.backend + ": no device (" + backend.no_device_reason + ")");
  }
  if (!rows.empty())
    print_table(std::cout, {"DEVICE", "BACKEND", "KIND", "TOTAL", "FREE", "FEATURES", "NAME"}, rows);
  for (const std::string& line : absent) std::cout << line << "\n";
  if (rows.empty()) {
    print_error("no backend plugin found a usable device");
    return kExitPlugin;
  }
  return kExitOk;
}

const bool registered =
    register_command({"devices", "List the devices of every backend plugin", run_devices});

}  // namespace
}  // namespace tandem::cli
