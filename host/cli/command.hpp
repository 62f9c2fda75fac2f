// Subcommands of `tandem`. Each lives in one file (cmd_<name>.cpp) that
// registers itself at static-initialisation time:
//
//   namespace { const bool registered = register_command({"train", "Train a model", run_train}); }
//
// main() dispatches on the first non-option argument. A command receives
// its own arguments (after the command name) and the global options given
// before it; it parses its options with parse_command_options (cli_common).
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "util/logger.hpp"

namespace tandem::cli {

struct GlobalOptions {
  std::vector<std::string> plugin_paths;
  // --plugin-option NAME.KEY=VALUE: host configuration "plugins.NAME.KEY",
  // which backend and comm plugin NAME receives in init and by config_get.
  std::vector<std::pair<std::string, std::string>> plugin_options;
  bool allow_insecure = false;
  std::set<std::string> override_plugins;  // --override-plugin NAME
  host::LogLevel log_level = host::LogLevel::warning;
};

struct CommandSpec {
  std::string name;
  std::string summary;  // one line for `tandem --help`
  int (*run)(const std::vector<std::string>& args, GlobalOptions globals);
};

bool register_command(CommandSpec spec);
// Registered commands, sorted by name.
std::vector<CommandSpec> commands();
const CommandSpec* find_command(const std::string& name);

// The whole command line: global options, dispatch, exit code.
int run_cli(int argc, char** argv);

}  // namespace tandem::cli
