// Helpers every subcommand uses: global options, option parsing with the
// uniform --help and usage-error behaviour, plugin loading, tables.
#pragma once

#include <boost/program_options.hpp>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "model/model_spec.hpp"
#include "plugin/host_services.hpp"
#include "plugin/registry.hpp"

namespace tandem::cli {

namespace po = boost::program_options;

// --plugin-path, --allow-insecure-plugins, --log-level.
po::options_description global_options_description();
// Adds the global options found in `vm` to `globals`; false on a bad value
// (message already printed).
bool merge_global_options(const po::variables_map& vm, GlobalOptions& globals);

// Parses a command's arguments against `options` (plus the global options,
// which may also follow the command). Returns an exit code when the command
// must stop now: 0 after --help, kExitUsage after a usage error.
// Why a numeric option (--threads, --comm-timeout, ...) or --device is out
// of range, or nothing; parse_command_options checks it for every command.
std::optional<std::string> out_of_range(const po::variables_map& vm);

std::optional<int> parse_command_options(const std::string& command, const std::string& synopsis,
                                         const std::vector<std::string>& args,
                                         const po::options_description& options,
                                         const po::positional_options_description& positional,
                                         po::variables_map& vm, GlobalOptions& globals);

// Host services and the plugin registry, discovered with the global options.
struct PluginSession {
  host::HostServices services;
  std::optional<host::PluginRegistry> registry;
};
// `config` is visible to plugins from their init on (e.g. "threads" = "4").
std::unique_ptr<PluginSession> load_plugins(const GlobalOptions& globals,
                                            const std::map<std::string, std::string>& config = {});
// The plugin configuration of `--threads N` (0: the backends' default).
std::map<std::string, std::string> threads_config(int threads);

// Prints rows under a header, columns padded to the widest cell.
void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows);

void print_error(const std::string& message);

// The exit code of a failed run: a plugin failure (a kernel failed or broke
// its contract), an input error (bad model file, data, configuration) or a
// runtime failure.
int exit_code_for(const host::Error& e);
// kExitPlugin for a plugin failure, else `otherwise` (the command's code
// for what failed at that point).
int exit_code_or(const host::Error& e, int otherwise);

// The model file of option "model" with the `--set` overrides of option
// "set" (eval, export, generate); errors name the file or override.
host::Result<host::model::ModelSpec> parse_model_option(const po::variables_map& vm);

}  // namespace tandem::cli
