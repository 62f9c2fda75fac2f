#include "train/collective_watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "util/logger.hpp"

namespace tandem::host::train {
namespace {

using Clock = std::chrono::steady_clock;

// The tandem program's exit code for a plugin error (cli/exit_codes.hpp).
constexpr int kExitPlugin = 3;

struct Watched {
  Clock::time_point deadline;
  WatchedCall::Describe describe;
  double timeout_seconds;
};

// One thread for the process, started by the first watched call. Deliberately
// never destroyed: a call may still be watched while statics are destroyed.
class Watchdog {
 public:
  static Watchdog& get() {
    static Watchdog* dog = new Watchdog;  // intentionally leaked
    return *dog;
  }

  uint64_t add(WatchedCall::Describe describe, double timeout_seconds) {
    const auto limit = std::chrono::duration<double>(timeout_seconds + watchdog_grace(timeout_seconds));
    std::lock_guard lock(mutex_);
    const uint64_t id = ++next_;
    calls_[id] = {Clock::now() + std::chrono::duration_cast<Clock::duration>(limit), std::move(describe),
                  timeout_seconds};
    if (!started_) {
      std::thread([this] { watch(); }).detach();
      started_ = true;
    }
    wake_.notify_one();
    return id;
  }

  void remove(uint64_t id) {
    std::lock_guard lock(mutex_);
    calls_.erase(id);
  }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (calls_.empty()) {
        wake_.wait(lock);
        continue;
      }
      const auto first = std::min_element(calls_.begin(), calls_.end(), [](const auto& a, const auto& b) {
        return a.second.deadline < b.second.deadline;
      });
      if (Clock::now() < first->second.deadline) {
        wake_.wait_until(lock, first->second.deadline);
        continue;
      }
      std::ostringstream text;
      text << first->second.describe() << " has not returned "
           << static_cast<long>(first->second.timeout_seconds + watchdog_grace(first->second.timeout_seconds))
           << " s after it began, past its timeout of " << first->second.timeout_seconds
           << " s (--comm-timeout): a rank stopped or hung, and the plugin does not end a collective at "
              "tdm_comm_init_info.timeout_seconds (sdk/ABI.md rule 46). Stopping this rank so that the job "
              "does not hang; fix or replace the comm plugin";
      log_error(text.str());
      std::fflush(nullptr);
      std::_Exit(kExitPlugin);
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<uint64_t, Watched> calls_;
  uint64_t next_ = 0;
  bool started_ = false;
};

}  // namespace

double watchdog_grace(double timeout_seconds) {
  return std::max(5.0, timeout_seconds / 4);
}

WatchedCall::WatchedCall(Describe describe, double timeout_seconds) {
  if (timeout_seconds > 0) id_ = Watchdog::get().add(std::move(describe), timeout_seconds);
}

WatchedCall::~WatchedCall() {
  if (id_ != 0) Watchdog::get().remove(id_);
}

}  // namespace tandem::host::train
