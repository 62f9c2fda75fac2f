#include "cli/command.hpp"

#include <algorithm>
#include <iostream>
#include <map>
#include <string>

#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"
#include "program/process_group.hpp"
#include "tandem/version.h"
#include "tandem_git_commit.h"  // generated at build time (host/CMakeLists.txt)
#include "util/logger.hpp"

#ifndef TANDEM_VERSION
#error "TANDEM_VERSION must be defined by the build (host/CMakeLists.txt)"
#endif

namespace tandem::cli {
namespace {

std::map<std::string, CommandSpec>& table() {
  static std::map<std::string, CommandSpec> commands;
  return commands;
}

bool takes_value(const std::string& option) {
  return option == "--plugin-path" || option == "--log-level" || option == "--plugin-option" ||
         option == "--override-plugin";
}

void print_usage(std::ostream& out, const po::options_description& top) {
  out << "Usage: tandem [global options] <command> [options]\n\n"
         "Train neural networks on GPU and CPU together.\n\nCommands:\n";
  size_t width = 0;
  for (const CommandSpec& c : commands()) width = std::max(width, c.name.size());
  for (const CommandSpec& c : commands())
    out << "  " << c.name << std::string(width - c.name.size() + 3, ' ') << c.summary << "\n";
  out << "\n"
      << top << "\n"
      << kExitCodeHelp << "\nRun 'tandem <command> --help' for the options of a command.\n";
}

// One fact per line, so a bug report can quote it and a script can grep it:
// the release, the commit it was built from ("unknown" outside a git
// checkout, "-dirty" with uncommitted changes) and the plugin ABI it speaks.
void print_version() {
  std::cout << "tandem " << TANDEM_VERSION << "\n"
            << "commit " << TANDEM_GIT_COMMIT << "\n"
            << "SDK " << TDM_SDK_VERSION << ", ABI " << TDM_ABI_MAJOR << "." << TDM_ABI_MINOR << "\n";
}

}  // namespace

bool register_command(CommandSpec spec) {
  std::string name = spec.name;
  return table().emplace(std::move(name), std::move(spec)).second;
}

std::vector<CommandSpec> commands() {
  std::vector<CommandSpec> out;
  for (const auto& [name, spec] : table()) out.push_back(spec);
  return out;
}

const CommandSpec* find_command(const std::string& name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

int run_cli(int argc, char** argv) {
  // Under a launcher every rank writes to the same terminal: tag the lines.
  if (const host::program::ProcessGroup group = host::program::detect_process_group(); group.world > 1)
    host::Logger::global().set_rank_tag("rank " + std::to_string(group.rank) + " of " +
                                        std::to_string(group.world));
  // Split at the command: options before it are global, the rest is the
  // command's (which may repeat global options).
  std::vector<std::string> before;
  std::string command;
  std::vector<std::string> after;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!command.empty()) {
      after.push_back(arg);
    } else if (!arg.empty() && arg[0] == '-') {
      before.push_back(arg);
      if (takes_value(arg) && i + 1 < argc) before.push_back(argv[++i]);
    } else {
      command = arg;
    }
  }

  po::options_description top("Global options");
  top.add_options()("help,h", "show this help")(
      "version", "show the tandem version, its git commit, the SDK and ABI versions");
  const po::options_description globals_desc = global_options_description();
  for (const auto& option : globals_desc.options()) top.add(option);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(before).options(top).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    print_error(std::string(e.what()) + " (see 'tandem --help')");
    return kExitUsage;
  }
  if (vm.count("version") != 0) {
    print_version();
    return kExitOk;
  }
  if (vm.count("help") != 0 && command.empty()) {
    print_usage(std::cout, top);
    return kExitOk;
  }
  if (command.empty()) {
    print_error("no command given");
    print_usage(std::cerr, top);
    return kExitUsage;
  }
  const CommandSpec* spec = find_command(command);
  if (spec == nullptr) {
    print_error("unknown command '" + command + "' (see 'tandem --help' for the list)");
    return kExitUsage;
  }
  GlobalOptions globals;
  if (!merge_global_options(vm, globals)) return kExitUsage;
  host::Logger::global().set_level(globals.log_level);
  if (vm.count("help") != 0) after.insert(after.begin(), "--help");  // `tandem --help plugins`
  return spec->run(after, globals);
}

}  // namespace tandem::cli
