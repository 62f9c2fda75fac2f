// `tandem plugins [-v]`: the loaded plugins and their metadata (sdk/ABI.md
// rule 13); with -v also the search path and every candidate tried.
#include <iostream>

#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"

namespace tandem::cli {
namespace {

std::string vendors_text(const host::LoadedPlugin& p) {
  std::string text;
  for (const host::VendorVersion& v : p.vendors)
    text += (text.empty() ? "" : ", ") + v.name + " " + v.version;
  return text.empty() ? "-" : text;
}

void print_verbose(const host::PluginRegistry& registry) {
  std::cout << "\nSearch path, in order:\n";
  int n = 0;
  for (const host::SearchDir& d : registry.search_dirs()) {
    std::cout << "  " << ++n << ". " << d.path.string() << " (" << d.origin << ")";
    if (!d.note.empty()) std::cout << ": " << d.note;
    std::cout << "\n";
  }
  std::cout << "\nCandidates, in order:\n";
  if (registry.candidates().empty()) std::cout << "  (no libtandem-<name>.so file found)\n";
  for (const host::Candidate& c : registry.candidates()) {
    std::cout << "  " << (c.loaded ? "loaded   " : "skipped  ") << c.path.string() << "\n";
    if (!c.loaded) std::cout << "           " << c.reason << "\n";
  }
  if (!registry.plugins().empty()) std::cout << "\nDescriptions:\n";
  for (const host::LoadedPlugin* p : registry.plugins())
    std::cout << "  " << p->name << ": " << p->description << "\n";
}

int run_plugins(const std::vector<std::string>& args, GlobalOptions globals) {
  po::options_description options("Options");
  options.add_options()(
      "verbose,v", "also show the search path and every candidate tried, with the reason it was skipped");
  po::variables_map vm;
  if (auto stop = parse_command_options("plugins", "[-v]", args, options, {}, vm, globals)) return *stop;
  const bool verbose = vm.count("verbose") != 0;

  std::unique_ptr<PluginSession> session = load_plugins(globals);
  const host::PluginRegistry& registry = *session->registry;
  std::vector<std::vector<std::string>> rows;
  for (const host::LoadedPlugin* p : registry.plugins())
    rows.push_back({p->name, host::plugin_kind_name(p->kind), p->version, p->sdk_version,
                    std::to_string(p->abi_major) + "." + std::to_string(p->abi_minor), vendors_text(*p),
                    p->path.string()});
  if (!rows.empty())
    print_table(std::cout, {"NAME", "KIND", "VERSION", "SDK", "ABI", "VENDORS", "PATH"}, rows);
  if (verbose) print_verbose(registry);
  if (rows.empty()) {
    print_error(std::string("no plugin could be loaded") +
                (verbose
                     ? ""
                     : "; run 'tandem plugins -v' to see where Tandem looked and why each file was skipped"));
    return kExitPlugin;
  }
  return kExitOk;
}

const bool registered = register_command(
    {"plugins", "List the loaded plugins (-v: every candidate tried and why it was skipped)", run_plugins});

}  // namespace
}  // namespace tandem::cli
