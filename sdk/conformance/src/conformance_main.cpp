// tandem-conformance: run the case catalogue on a backend plugin against the
// `reference` backend and print one line per case; or, for a comm plugin,
// its collectives on local processes it starts (comm_kit.hpp).
//
//   tandem-conformance --plugin build/lib/tandem/plugins/libtandem-mine.so
//       [--reference <libtandem-reference.so>] [--op <name>]... [--dtype f32]
//       [--require-op <name>[:<dtype>]]... [--require-all] [--override-plugin <name>]
//       [--allow-insecure-plugins] [--list] [--verbose]
//
// Prints the cases that failed (every case with --verbose), then a summary.
// Exit status: 0 when nothing failed (UNSUPPORTED is fine, except for the
// f32 cases of ops named by --require-op, or of every catalog op with
// --require-all, and the cases of an op and dtype named as "op:dtype": a
// backend may decline any dtype but f32, sdk/ops.md), 1 when a case failed,
// 2 on a usage or load error, 77 when the candidate's device is absent on
// this machine (ctest: skipped).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "comm_kit.hpp"
#include "skeleton.hpp"
#include "tandem/conformance/runner.hpp"

namespace fs = std::filesystem;
namespace tc = tandem::conformance;

namespace {

constexpr const char* kReferenceFile = "libtandem-reference.so";

struct Options {
  std::string plugin, reference;
  tc::CommKitOptions comm;  // --ranks, --timeout: a comm plugin's kit
  std::set<std::string> ops;
  std::set<std::string> required;  // "op:dtype"
  std::string dtype;
  bool list = false;
  tc::OpenOptions open;                      // --override-plugin, --allow-insecure-plugins
  std::string new_backend, new_backend_dir;  // --new-backend NAME DIR
};

void usage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: tandem-conformance --plugin <libtandem-X.so> [--reference <path>] [--op <name>]...\n"
      "                          [--dtype <f32|bf16|f16|...>] [--require-op <name>[:<dtype>]]... "
      "[--require-all]\n"
      "                          [--override-plugin <name>] [--allow-insecure-plugins] [--list] [--verbose]\n"
      "       tandem-conformance --plugin <libtandem-X.so> (a comm plugin) [--ranks 1,2,4] [--timeout <s>]\n"
      "       tandem-conformance --new-backend <name> <dir>\n"
      "Runs every case of the op catalogue on the plugin and compares it with the reference backend,\n"
      "and prints the cases that failed (--verbose: every case) and a summary by op and dtype.\n"
      "--require-op fails an op's declined f32 cases (a backend may decline any other dtype), or with\n"
      "<name>:<dtype> that dtype's; --require-all: every op's f32 cases.\n"
      "The plugin is first checked as the tandem host checks it: a plugin the host would refuse\n"
      "(file permissions, damaged file, descriptor, missing functions, the name of an installed\n"
      "plugin without --override-plugin) fails here with the host's message.\n"
      "--new-backend writes a new backend plugin project named <name> into the new directory <dir>:\n"
      "the SDK's example backend, renamed, which builds, loads, passes and hosts a pinned layer.\n"
      "A comm plugin gets its collectives checked on local processes the kit starts (--ranks 1,2,4),\n"
      "every result exact, and its timeout (--timeout 3 seconds) honoured when a rank never joins.\n");
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string& into) {
      if (i + 1 >= argc) return false;
      into = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--plugin" && value(o.plugin)) continue;
    if (a == "--new-backend" && value(o.new_backend) && value(o.new_backend_dir)) continue;
    if (a == "--reference" && value(o.reference)) continue;
    if (a == "--dtype" && value(o.dtype)) continue;
    if (a == "--ranks" && value(v)) {
      o.comm.ranks.clear();
      for (size_t at = 0; at <= v.size();) {
        const size_t comma = v.find(',', at);
        const int n = std::atoi(v.substr(at, comma - at).c_str());
        if (n < 1)
          return std::fprintf(stderr, "tandem-conformance: --ranks %s: expected sizes like 1,2,4\n",
                              v.c_str()),
                 false;
        o.comm.ranks.push_back(n);
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
      continue;
    }
    if (a == "--timeout" && value(v)) {
      o.comm.timeout_seconds = std::atof(v.c_str());
      if (!(o.comm.timeout_seconds > 0))
        return std::fprintf(stderr, "tandem-conformance: --timeout %s: expected seconds above 0\n",
                            v.c_str()),
               false;
      continue;
    }
    if (a == "--op" && value(v))
      o.ops.insert(v);
    else if (a == "--override-plugin" && value(v))
      o.open.override_plugins.push_back(v);
    else if (a == "--allow-insecure-plugins")
      o.open.allow_insecure = true;
    else if (a == "--require-op" && value(v))
      o.required.insert(v.find(':') == std::string::npos ? v + ":f32" : v);
    else if (a == "--require-all")
      for (const std::string& op : tc::catalog_ops()) o.required.insert(op + ":f32");
    else if (a == "--list")
      o.list = true;
    else if (a == "--verbose" || a == "-v")
      tc::set_verbose(true);
    else if (a == "--help" || a == "-h")
      usage(stdout), std::exit(0);
    else {
      std::fprintf(stderr, "tandem-conformance: unknown or incomplete argument '%s'\n", a.c_str());
      return false;
    }
  }
  return true;
}

// The plugin directories that came with this program: its build tree's or
// its installed host's (relative to itself, whatever the install libdir),
// then the install prefix's; those that exist.
std::vector<fs::path> system_plugin_dirs() {
  std::vector<fs::path> dirs;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(self.parent_path() / TANDEM_CONFORMANCE_RELATIVE_PLUGIN_DIR);
    // The build tree's layout (bin/ beside lib/tandem/plugins/), which the
    // install layout's libdir (lib/x86_64-linux-gnu) may not match.
    dirs.push_back(self.parent_path() / "../lib/tandem/plugins");
  }
  dirs.push_back(TANDEM_CONFORMANCE_INSTALL_PLUGIN_DIR);
  std::vector<fs::path> existing;
  for (const fs::path& d : dirs)
    if (fs::is_directory(d, ec)) existing.push_back(d.lexically_normal());
  return existing;
}

// The oracle: --reference, else the reference backend that came with this
// program — never one found beside the candidate, where a file of that
// name could be anything (the candidate itself, renamed).
std::string find_reference(const Options& o) {
  if (!o.reference.empty()) return o.reference;
  std::error_code ec;
  for (const fs::path& dir : o.open.system_dirs)
    if (fs::exists(dir / kReferenceFile, ec)) return (dir / kReferenceFile).string();
  std::fprintf(stderr,
               "tandem-conformance: cannot find the reference backend in the plugin directories of this "
               "installation (%zu found); pass --reference <path to %s>\n",
               o.open.system_dirs.size(), kReferenceFile);
  return "";
}

bool selected(const Options& o, const tc::Case& c) {
  return (o.ops.empty() || o.ops.count(c.op)) && (o.dtype.empty() || o.dtype == tandem::dtype_name(c.dtype));
}

// Which ops passed every case, and for the others, per dtype, how many cases
// passed / failed / were declined: a backend that declines f16 but passes
// every f32 case reads as exactly that.
void print_op_summary(const std::vector<std::string>& ops,
                      const std::map<std::string, std::map<std::string, std::array<int, 3>>>& tally) {
  int complete = 0;
  std::string lines, declined;
  int declined_count = 0;
  for (const std::string& op : ops) {
    bool clean = true, none_ran = true;
    std::string row = "  " + op + ":";
    for (const auto& [dtype, t] : tally.at(op)) {
      clean = clean && t[1] == 0 && t[2] == 0;
      none_ran = none_ran && t[0] == 0 && t[1] == 0;
      row += " " + dtype + " " +
             (t[1] == 0 && t[2] == 0 ? "passed " + std::to_string(t[0])
                                     : std::to_string(t[0]) + " passed " + std::to_string(t[1]) + " failed " +
                                           std::to_string(t[2]) + " declined") +
             ";";
    }
    if (clean) {
      ++complete;
    } else if (none_ran) {  // not implemented at all: one list, not a row each
      declined += (declined.empty() ? "" : ", ") + op;
      ++declined_count;
    } else {
      lines += row.substr(0, row.size() - 1) + "\n";
    }
  }
  std::printf("ops that passed every case: %d of %zu\n", complete, ops.size());
  if (!lines.empty()) std::printf("the others, by dtype (cases):\n%s", lines.c_str());
  if (!declined.empty()) std::printf("declined in every case (%d): %s\n", declined_count, declined.c_str());
}

int new_backend(const Options& o) {
  const std::string error = tc::write_skeleton(o.new_backend, o.new_backend_dir, o.open.system_dirs);
  if (!error.empty()) return std::fprintf(stderr, "tandem-conformance: --new-backend %s\n", error.c_str()), 2;
  const std::string& d = o.new_backend_dir;
  const std::string& n = o.new_backend;
  std::printf(
      "wrote backend '%s' into %s (README.md says what is there). Next:\n"
      "  cmake -S %s -B %s/build -DCMAKE_BUILD_TYPE=Release && cmake --build %s/build\n"
      "  tandem plugins --plugin-path %s/build\n"
      "  tandem-conformance --plugin %s/build/libtandem-%s.so\n"
      "  tandem train %s/pinned_layer.toml --plugin-path %s/build --device cpu --run-dir %s/run\n",
      n.c_str(), d.c_str(), d.c_str(), d.c_str(), d.c_str(), d.c_str(), d.c_str(), n.c_str(), d.c_str(),
      d.c_str(), d.c_str());
  return 0;
}

}  // namespace

// --op and --require-op name catalog ops and dtypes; false after saying
// which does not.
bool selection_is_known(const Options& o) {
  const std::set<std::string> known(tc::catalog_ops().begin(), tc::catalog_ops().end());
  for (const std::string& op : o.ops)
    if (!known.count(op))
      return std::fprintf(stderr, "tandem-conformance: '%s' is not a catalog op\n", op.c_str()), false;
  for (const std::string& required : o.required) {
    const std::string op = required.substr(0, required.find(':'));
    const std::string dtype = required.substr(required.find(':') + 1);
    if (!known.count(op))
      return std::fprintf(stderr, "tandem-conformance: --require-op %s: '%s' is not a catalog op\n",
                          required.c_str(), op.c_str()),
             false;
    const std::array<tdm_dtype, 8> dtypes = {TDM_F32, TDM_F64, TDM_F16, TDM_BF16,
                                             TDM_S8,  TDM_U8,  TDM_S32, TDM_S64};
    if (std::none_of(dtypes.begin(), dtypes.end(),
                     [&](tdm_dtype t) { return dtype == tandem::dtype_name(t); }))
      return std::fprintf(stderr,
                          "tandem-conformance: --require-op %s: '%s' is not a dtype (f32, bf16, f16, ...)\n",
                          required.c_str(), dtype.c_str()),
             false;
  }
  return true;
}

// `--comm-worker PATH --world N --dir D --timeout S --rank R|launcher
// [--allow-insecure-plugins] [--override-plugin NAME]...`: one rank of the
// comm kit, started by it (comm_kit.hpp), its lines into D/rank-R.log.
int comm_worker(int argc, char** argv) {
  std::string path = argv[2], dir, rank_text;
  int world = 1;
  double timeout = 3;
  tc::OpenOptions open;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--world")
      world = std::atoi(v.c_str()), ++i;
    else if (a == "--dir")
      dir = v, ++i;
    else if (a == "--timeout")
      timeout = std::atof(v.c_str()), ++i;
    else if (a == "--rank")
      rank_text = v, ++i;
    else if (a == "--override-plugin")
      open.override_plugins.push_back(v), ++i;
    else if (a == "--allow-insecure-plugins")
      open.allow_insecure = true;
  }
  int rank = std::atoi(rank_text.c_str());
  if (rank_text == "launcher") {  // mpiexec's variables, as the host reads them
    const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
    if (r == nullptr) r = std::getenv("PMI_RANK");
    rank = r != nullptr ? std::atoi(r) : 0;
    if (std::freopen((dir + "/rank-" + std::to_string(rank) + ".log").c_str(), "w", stdout) == nullptr)
      return 1;
  }
  return tc::run_comm_worker(path, rank, world, dir, timeout, open);
}

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--comm-worker") return comm_worker(argc, argv);
  Options o;
  if (!parse(argc, argv, o)) return usage(stderr), 2;
  if (!selection_is_known(o)) return 2;
  if (o.list) {
    for (const tc::Case& c : tc::catalogue())
      if (selected(o, c))
        std::printf("%s %s %s\n", c.op.c_str(), tandem::dtype_name(c.dtype), c.label().c_str());
    std::printf("\n%s", tc::tolerance_table().c_str());
    return 0;
  }
  o.open.system_dirs = system_plugin_dirs();
  if (!o.new_backend.empty()) return new_backend(o);
  if (o.plugin.empty()) return usage(stderr), 2;

  tc::Outcome outcome;
  {
    tc::OpenOptions either = o.open;  // a comm plugin gets the comm kit
    either.accept_comm = true;
    auto loaded = tc::PluginUnderTest::load(o.plugin, outcome, either);
    if (loaded && loaded->comm_api() != nullptr) {
      o.comm.open = o.open;
      return tc::run_comm_kit(o.plugin, o.comm);
    }
  }
  auto candidate = tc::PluginUnderTest::open(o.plugin, outcome, o.open);
  if (outcome.status == tc::Status::skipped) {
    std::printf("SKIPPED: %s: %s\n", o.plugin.c_str(), outcome.message.c_str());
    return 77;
  }
  if (!candidate) return std::fprintf(stderr, "tandem-conformance: %s\n", outcome.message.c_str()), 2;
  const std::string ref_path = find_reference(o);
  if (ref_path.empty()) return 2;
  auto reference = tc::PluginUnderTest::open(ref_path, outcome);
  if (!reference)
    return std::fprintf(stderr, "tandem-conformance: reference backend: %s\n", outcome.message.c_str()), 2;
  std::printf("candidate: %s on %s\nreference: %s (%s)\n", candidate->description().c_str(),
              candidate->device_name().c_str(), reference->description().c_str(), ref_path.c_str());

  int passed = 0, failed = 0, unsupported = 0;
  std::set<std::string> failed_required;
  // Per op and dtype: cases passed, failed, declined (catalog order of ops).
  std::vector<std::string> op_order;
  std::map<std::string, std::map<std::string, std::array<int, 3>>> tally;
  for (const tc::Case& c : tc::catalogue()) {
    if (!selected(o, c)) continue;
    tc::CaseResult r = tc::run_case(*candidate, *reference, c);
    if (r.status == tc::Status::unsupported && o.required.count(c.op + ":" + tandem::dtype_name(c.dtype))) {
      r.status = tc::Status::error;
      r.message = "required op declined: " + r.message;
    }
    if (tc::verbose() || (r.status != tc::Status::ok && r.status != tc::Status::unsupported)) {
      std::string line = tc::report_line(c, r);
      if (tc::verbose() && !r.implementation.empty()) line += "  [" + r.implementation + "]";
      std::printf("%s\n", line.c_str());
    }
    if (!tally.count(c.op)) op_order.push_back(c.op);
    std::array<int, 3>& t = tally[c.op][tandem::dtype_name(c.dtype)];
    if (r.status == tc::Status::ok)
      ++passed, ++t[0];
    else if (r.status == tc::Status::unsupported)
      ++unsupported, ++t[2];
    else
      ++failed, ++t[1];
  }
  std::printf("\n%d passed, %d failed, %d unsupported\n", passed, failed, unsupported);
  print_op_summary(op_order, tally);
  std::fflush(stdout);
  return failed == 0 ? 0 : 1;
}
