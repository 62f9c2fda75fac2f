#include "cli/cli_common.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/exit_codes.hpp"
#include "model/model_parser.hpp"
#include "util/logger.hpp"

namespace tandem::cli {

po::options_description global_options_description() {
  po::options_description desc("Global options");
  desc.add_options()("plugin-path", po::value<std::vector<std::string>>()->composing()->value_name("DIRS"),
                     "search these ':'-separated directories for plugins first (may be repeated)")(
      "plugin-option", po::value<std::vector<std::string>>()->composing()->value_name("NAME.KEY=VALUE"),
      "an option for backend or comm plugin NAME, e.g. cuda.tf32=true (may be repeated; the plugin's "
      "README lists its options)")(
      "override-plugin", po::value<std::vector<std::string>>()->composing()->value_name("NAME"),
      "use plugin NAME from --plugin-path or TANDEM_PLUGIN_PATH although an installed plugin has that "
      "name (refused otherwise; warns on every command; may be repeated)")(
      "allow-insecure-plugins", po::bool_switch(),
      "load plugin files even when they or their directory are writable by other users")(
      "log-level", po::value<std::string>()->value_name("LEVEL"), "error, warning (default), info or debug");
  return desc;
}

namespace {

// Every directory a --plugin-path value names (':'-separated) exists and is
// a directory; else the message that says which and what to do.
std::optional<std::string> bad_plugin_path(const std::string& value) {
  std::stringstream list(value);
  for (std::string dir; std::getline(list, dir, ':');) {
    if (dir.empty()) continue;
    std::error_code ec;
    const auto status = std::filesystem::status(dir, ec);
    if (!std::filesystem::exists(status))
      return "--plugin-path " + dir +
             ": no such directory (plugins are searched for in directories that exist)";
    if (!std::filesystem::is_directory(status))
      return "--plugin-path " + dir +
             ": not a directory; plugins are searched for in directories, so put the plugin file in a "
             "directory of its own and name that";
  }
  return std::nullopt;
}

}  // namespace

bool merge_global_options(const po::variables_map& vm, GlobalOptions& globals) {
  if (vm.count("plugin-path") != 0) {
    const auto& paths = vm["plugin-path"].as<std::vector<std::string>>();
    for (const std::string& path : paths)
      if (std::optional<std::string> why = bad_plugin_path(path)) {
        print_error(*why);
        return false;
      }
    globals.plugin_paths.insert(globals.plugin_paths.end(), paths.begin(), paths.end());
  }
  if (vm.count("plugin-option") != 0)
    for (const std::string& option : vm["plugin-option"].as<std::vector<std::string>>()) {
      const size_t eq = option.find('='), dot = option.find('.');
      if (eq == std::string::npos || dot == 0 || dot == std::string::npos || dot + 1 >= eq) {
        print_error("--plugin-option " + option +
                    ": expected NAME.KEY=VALUE, e.g. --plugin-option cuda.tf32=true");
        return false;
      }
      globals.plugin_options.emplace_back(option.substr(0, eq), option.substr(eq + 1));
    }
  if (vm.count("override-plugin") != 0)
    for (const std::string& name : vm["override-plugin"].as<std::vector<std::string>>())
      globals.override_plugins.insert(name);
  if (vm.count("allow-insecure-plugins") != 0 && vm["allow-insecure-plugins"].as<bool>())
    globals.allow_insecure = true;
  if (vm.count("log-level") != 0) {
    const std::string& text = vm["log-level"].as<std::string>();
    std::optional<host::LogLevel> level = host::parse_log_level(text);
    if (!level) {
      print_error("unknown log level '" + text + "'; use error, warning, info or debug");
      return false;
    }
    globals.log_level = *level;
  }
  return true;
}

namespace {

// The numeric options of every command and their ranges: a value outside
// is a usage error naming the option, never a silent default.
struct Limit {
  const char* option;
  double low;
  bool inclusive;
  const char* what;
};
constexpr Limit kLimits[] = {
    {"threads", 0, true, "0 (the backend's default) or more"},
    {"loader-threads", 1, true, "at least 1"},
    {"comm-timeout", 0, false, "seconds, more than 0"},
    {"bucket-mb", 0, true, "0 (one gradient per message) or more"},
    {"calib", 1, true, "at least 1 sample"},
    {"steps", 1, true, "at least 1"},
    {"repeats", 1, true, "at least 1"},
    {"warmup", 0, true, "0 or more"},
    {"repeat", 1, true, "at least 1"},
};

template <class T>
std::optional<double> number_of(const po::variable_value& v) {
  if (const T* p = boost::any_cast<T>(&v.value())) return static_cast<double>(*p);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> out_of_range(const po::variables_map& vm) {
  for (const Limit& l : kLimits) {
    if (vm.count(l.option) == 0 || vm[l.option].defaulted()) continue;
    std::optional<double> v = number_of<int>(vm[l.option]);
    if (!v) v = number_of<int64_t>(vm[l.option]);
    if (!v) v = number_of<double>(vm[l.option]);
    if (v && (!std::isfinite(*v) || (l.inclusive ? *v < l.low : *v <= l.low))) {
      std::ostringstream text;
      text << "--" << l.option << " " << *v << ": must be " << l.what;
      return text.str();
    }
  }
  if (vm.count("threads") != 0 && !vm["threads"].defaulted()) {
    const std::optional<double> threads = number_of<int>(vm["threads"]);
    const unsigned cores = std::thread::hardware_concurrency();
    if (threads && cores > 0 && *threads > cores) {
      std::ostringstream text;
      text << "--threads " << *threads << ": this machine has " << cores
           << " cores (hardware threads); give at most " << cores << ", or 0 for the backend's default";
      return text.str();
    }
  }
  if (vm.count("run-dir") != 0)
    if (const auto* dir = boost::any_cast<std::string>(&vm["run-dir"].value());
        dir != nullptr && dir->empty())
      return "--run-dir '': an empty path; name the run directory (without the option: runs/<the model "
             "file's name>)";
  if (vm.count("device") != 0) {
    const std::string list = vm["device"].as<std::string>();
    std::stringstream items(list);
    bool empty_item = !list.empty() && (list.front() == ',' || list.back() == ',');
    for (std::string item; std::getline(items, item, ',');) empty_item |= item.empty();
    if (empty_item)
      return "--device '" + list +
             "': a device list names a device between every two commas (e.g. cuda:0,cpu)";
  }
  return std::nullopt;
}

std::optional<int> parse_command_options(const std::string& command, const std::string& synopsis,
                                         const std::vector<std::string>& args,
                                         const po::options_description& options,
                                         const po::positional_options_description& positional,
                                         po::variables_map& vm, GlobalOptions& globals) {
  po::options_description help("Help");
  help.add_options()("help,h", "show this help");
  po::options_description all;
  if (!options.options().empty()) all.add(options);
  all.add(help).add(global_options_description());
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    print_error(std::string(e.what()) + " (see 'tandem " + command + " --help')");
    return kExitUsage;
  }
  if (vm.count("help") != 0) {
    std::cout << "Usage: tandem " << command << (synopsis.empty() ? "" : " ") << synopsis << "\n\n"
              << all << "\n"
              << kExitCodeHelp;
    return kExitOk;
  }
  if (!merge_global_options(vm, globals)) return kExitUsage;
  host::Logger::global().set_level(globals.log_level);
  if (auto why = out_of_range(vm)) {
    print_error(*why + " (see 'tandem " + command + " --help')");
    return kExitUsage;
  }
  return std::nullopt;
}

std::map<std::string, std::string> threads_config(int threads) {
  if (threads <= 0) return {};
  return {{"threads", std::to_string(threads)}};
}

std::unique_ptr<PluginSession> load_plugins(const GlobalOptions& globals,
                                            const std::map<std::string, std::string>& config) {
  auto session = std::make_unique<PluginSession>();
  for (const auto& [key, value] : config) session->services.config().set(key, value);
  for (const auto& [key, value] : globals.plugin_options)
    session->services.config().set("plugins." + key, value);
  host::DiscoveryOptions options;
  options.plugin_paths = globals.plugin_paths;
  options.allow_insecure = globals.allow_insecure;
  options.override_plugins = globals.override_plugins;
  session->registry.emplace(host::PluginRegistry::discover(options, session->services));
  return session;
}

void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  };
  print(header);
  for (const auto& row : rows) print(row);
}

void print_error(const std::string& message) {
  // One write: the ranks of a parallel run share the terminal, and a line
  // written in pieces interleaves with theirs.
  std::cerr << host::Logger::global().prefix() + "error: " + message + "\n";
}

int exit_code_or(const host::Error& e, int otherwise) {
  return e.plugin_failure ? kExitPlugin : otherwise;
}

int exit_code_for(const host::Error& e) {
  if (e.plugin_failure) return kExitPlugin;
  return e.status == TDM_INVALID_ARGUMENT || e.status == TDM_NOT_FOUND ? kExitInput : kExitRuntimeFailure;
}

host::Result<host::model::ModelSpec> parse_model_option(const po::variables_map& vm) {
  const auto overrides =
      vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
  return host::model::parse_model_file(vm["model"].as<std::string>(), overrides);
}

}  // namespace tandem::cli
