// The comm kit's parent (comm_kit.hpp): one worker process per rank, their
// lines merged into one verdict per case and size.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "comm_kit.hpp"

namespace tandem::conformance {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string self_path() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("tandem-conformance") : self.string();
}

std::string find_in_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (size_t begin = 0; begin <= dirs.size();) {
    const size_t end = dirs.find(':', begin);
    const fs::path candidate = fs::path(dirs.substr(begin, end - begin)) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return "";
}

// Starts `argv` in a process group of its own, its output to `log`.
pid_t start(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setpgid(0, 0);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  std::printf("FAIL launch: cannot run %s\n", args[0]);
  std::_Exit(127);
}

struct CaseVerdict {
  std::string status = "PASS";  // PASS, UNSUPPORTED or FAIL
  std::string why;              // of the first rank that failed or declined
};

// Every case's verdict over the ranks' logs, in the order the cases ran.
std::vector<std::pair<std::string, CaseVerdict>> merge(const std::vector<std::string>& logs, bool killed,
                                                       double timeout_seconds, double waited) {
  std::vector<std::pair<std::string, CaseVerdict>> cases;
  std::map<std::string, size_t> index;
  auto verdict = [&](const std::string& name) -> CaseVerdict& {
    auto [it, added] = index.emplace(name, cases.size());
    if (added) cases.push_back({name, {}});
    return cases[it->second].second;
  };
  for (size_t rank = 0; rank < logs.size(); ++rank) {
    std::ifstream in(logs[rank]);
    std::string line, running;
    while (std::getline(in, line)) {
      const size_t space = line.find(' ');
      if (space == std::string::npos) continue;
      const std::string word = line.substr(0, space), rest = line.substr(space + 1);
      const size_t colon = rest.find(": ");
      const std::string name = word == "RUN" || word == "PASS" ? rest : rest.substr(0, colon);
      const std::string why = colon == std::string::npos ? "" : rest.substr(colon + 2);
      if (word == "RUN") {
        running = name;
        continue;
      }
      if (word != "PASS" && word != "FAIL" && word != "UNSUPPORTED") continue;
      if (name == running) running.clear();
      CaseVerdict& v = verdict(name);
      if (word == "FAIL" && v.status != "FAIL")
        v = {"FAIL", "rank " + std::to_string(rank) + ": " + why};
      else if (word == "UNSUPPORTED" && v.status == "PASS")
        v = {"UNSUPPORTED", why};
    }
    if (!running.empty()) {  // the rank never finished this case
      CaseVerdict& v = verdict(running);
      v = {"FAIL", "rank " + std::to_string(rank) + " never returned from it" +
                       (killed ? " (stopped after " + std::to_string(static_cast<int>(waited)) +
                                     " s; its timeout was " + std::to_string(timeout_seconds) +
                                     " s: the plugin does not honour tdm_comm_init_info.timeout_seconds)"
                               : " (the worker died; its log: " + logs[rank] + ")")};
    }
  }
  return cases;
}

// One size: its workers, their verdicts printed; the number of failed cases
// (-1 when the size cannot run here).
int run_size(const std::string& path, const tdm_comm_api& api, int world, const CommKitOptions& options) {
  char pattern[] = "/tmp/tandem-comm-kit-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) return std::printf("cannot create a temporary directory\n"), -1;
  const std::string dir = pattern;
  std::vector<std::string> worker = {
      self_path(), "--comm-worker",       path,
      "--world",   std::to_string(world), "--dir",
      dir,         "--timeout",           std::to_string(options.timeout_seconds)};
  if (options.open.allow_insecure) worker.push_back("--allow-insecure-plugins");
  for (const std::string& name : options.open.override_plugins)
    worker.insert(worker.end(), {"--override-plugin", name});
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  for (int r = 0; r < world; ++r) logs.push_back(dir + "/rank-" + std::to_string(r) + ".log");
  if (api.comm_unique_id != nullptr || world == 1) {
    for (int r = 0; r < world; ++r) {
      std::vector<std::string> args = worker;
      args.insert(args.end(), {"--rank", std::to_string(r)});
      pids.push_back(start(args, logs[static_cast<size_t>(r)]));
    }
  } else {
    // A plugin that joins its ranks itself (MPI) needs their launcher.
    const std::string mpiexec = find_in_path("mpiexec");
    if (mpiexec.empty()) {
      std::printf(
          "UNSUPPORTED %d ranks: the plugin joins its ranks itself (it has no comm_unique_id), so its "
          "workers need a launcher, and mpiexec is not on PATH\n",
          world);
      return -1;
    }
    std::vector<std::string> args = {mpiexec, "-np", std::to_string(world), "--oversubscribe"};
    if (::geteuid() == 0) args.push_back("--allow-run-as-root");
    args.insert(args.end(), worker.begin(), worker.end());
    args.insert(args.end(), {"--rank", "launcher"});
    pids.push_back(start(args, dir + "/launcher.log"));
  }
  // Cases take seconds; the timeout case up to 2.5 timeouts.
  const double limit = 60 + 4 * options.timeout_seconds;
  const auto started = Clock::now();
  size_t running = pids.size();
  bool killed = false;
  while (running > 0) {
    for (pid_t& pid : pids)
      if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == pid) pid = 0, --running;
    if (running == 0) break;
    if (std::chrono::duration<double>(Clock::now() - started).count() > limit) {
      for (pid_t pid : pids)
        if (pid > 0) ::kill(-pid, SIGKILL), ::waitpid(pid, nullptr, 0);
      killed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double waited = std::chrono::duration<double>(Clock::now() - started).count();
  int passed = 0, failed = 0, unsupported = 0;
  for (const auto& [name, v] : merge(logs, killed, options.timeout_seconds, waited)) {
    if (v.status == "FAIL") ++failed;
    if (v.status == "UNSUPPORTED") ++unsupported;
    if (v.status == "PASS") ++passed;
    if (v.status == "FAIL" || verbose())
      std::printf("%s %d ranks: %s%s%s\n", v.status.c_str(), world, name.c_str(), v.why.empty() ? "" : ": ",
                  v.why.c_str());
  }
  std::printf("%d ranks: %d passed, %d failed, %d unsupported\n", world, passed, failed, unsupported);
  std::fflush(stdout);
  if (failed == 0 && !killed) fs::remove_all(dir);
  return failed + (killed && failed == 0 ? 1 : 0);
}

}  // namespace

int run_comm_kit(const std::string& path, const CommKitOptions& options) {
  OpenOptions open = options.open;
  open.accept_comm = true;
  Outcome outcome;
  auto plugin = PluginUnderTest::load(path, outcome, open);
  if (!plugin) return std::fprintf(stderr, "tandem-conformance: %s\n", outcome.message.c_str()), 2;
  std::printf("candidate: %s (comm plugin; %s)\n", plugin->description().c_str(),
              plugin->comm_api()->comm_unique_id != nullptr ? "rendezvous through comm_unique_id"
                                                            : "joins its ranks itself");
  std::fflush(stdout);
  int failed = 0;
  for (int world : options.ranks) {
    const int f = run_size(path, *plugin->comm_api(), world, options);
    if (f > 0) failed += f;
  }
  std::printf("\n%s\n", failed == 0 ? "every case passed (declined optional dtypes aside)"
                                    : (std::to_string(failed) + " case(s) failed").c_str());
  return failed == 0 ? 0 : 1;
}

}  // namespace tandem::conformance
