#include "exec/copy_worker.hpp"

#include <exception>
#include <string>

namespace tandem::host::exec {

CopyWorker::~CopyWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

CopyWorker::Ticket CopyWorker::post(Job job) {
  Ticket ticket;
  ticket.state_ = std::make_shared<Ticket::State>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.emplace_back(std::move(job), ticket.state_);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  changed_.notify_all();
  return ticket;
}

Result<void> CopyWorker::wait(const Ticket& ticket) {
  if (!ticket) return {};
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return ticket.state_->done; });
  return ticket.state_->result;
}

void CopyWorker::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything posted has run
    auto [job, state] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Result<void> result;
    try {
      result = job();
    } catch (const std::exception& e) {  // an exception must not end the process from this thread
      result = make_error(std::string("a copy failed on the copy thread: ") + e.what(), TDM_INTERNAL);
    }
    lock.lock();
    state->result = std::move(result);
    state->done = true;
    changed_.notify_all();
  }
}

}  // namespace tandem::host::exec
