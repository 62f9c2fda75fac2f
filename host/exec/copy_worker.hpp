// One thread and a queue: the host side of asynchronous copies. Jobs run in
// the order they were posted; each post returns a ticket whose wait() blocks
// until that job finished and returns its result. The thread starts with the
// first job and is joined (after the queue drained) by the destructor.
//
// Thread use: post and wait from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "util/result.hpp"

namespace tandem::host::exec {

class CopyWorker {
 public:
  using Job = std::function<Result<void>()>;
  class Ticket {
   public:
    Ticket() = default;
    explicit operator bool() const noexcept { return state_ != nullptr; }

   private:
    friend class CopyWorker;
    struct State {
      bool done = false;
      Result<void> result;
    };
    std::shared_ptr<State> state_;
  };

  CopyWorker() = default;
  CopyWorker(const CopyWorker&) = delete;
  CopyWorker& operator=(const CopyWorker&) = delete;
  ~CopyWorker();

  Ticket post(Job job);
  // Blocks until the job of `ticket` has run; its result (an empty ticket: ok).
  Result<void> wait(const Ticket& ticket);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable changed_;  // a job queued, a job done, or stopping
  std::deque<std::pair<Job, std::shared_ptr<Ticket::State>>> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: started after everything above exists
};

}  // namespace tandem::host::exec
