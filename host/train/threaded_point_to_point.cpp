// ThreadedPointToPoint: a thread per peer and direction runs the blocking
// transfers in the order they were started.
#include "train/threaded_point_to_point.hpp"

#include <utility>

namespace tandem::host::train {

struct ThreadedPointToPoint::Job {
  void* data = nullptr;
  size_t bytes = 0;
  std::mutex mutex;
  bool done = false;
  std::optional<Error> failure;
};

class ThreadedPointToPoint::Lane {
 public:
  Lane(Blocking transfer, int peer)
      : transfer_(std::move(transfer)), peer_(peer), thread_([this] { loop(); }) {}
  ~Lane() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  // Nothing queued or moving: the thread only waits for work.
  bool idle() {
    std::lock_guard lock(mutex_);
    return queue_.empty() && !busy_;
  }
  void post(std::shared_ptr<Job> job) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(job));
    }
    changed_.notify_all();
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::shared_ptr<Job> job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      // After a failure nothing more moves: the peer would take the next
      // message for the lost one.
      Result<void> moved =
          failed_ ? Result<void>(make_error("an earlier message to or from this stage failed", TDM_ABORTED))
                  : transfer_(job->data, job->bytes, peer_);
      {
        std::lock_guard job_lock(job->mutex);
        job->done = true;
        if (!moved) job->failure = moved.error();
      }
      lock.lock();
      busy_ = false;
      failed_ |= !moved;
    }
  }

  Blocking transfer_;  // its own: a lane left running outlives its owner
  int peer_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool busy_ = false, closing_ = false, failed_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

class ThreadedPointToPoint::Transfer final : public exec::StageLink::Transfer {
 public:
  explicit Transfer(std::shared_ptr<Job> job) : job_(std::move(job)) {}
  Result<bool> finished() override {
    std::lock_guard lock(job_->mutex);
    if (job_->failure) return *job_->failure;
    return job_->done;
  }

 private:
  std::shared_ptr<Job> job_;
};

ThreadedPointToPoint::ThreadedPointToPoint(Blocking send, Blocking receive)
    : send_(std::move(send)), receive_(std::move(receive)) {}

ThreadedPointToPoint::~ThreadedPointToPoint() {
  for (auto& [key, lane] : lanes_)
    if (!lane->idle()) (void)lane.release();  // its thread waits on a peer that may never come
}

bool ThreadedPointToPoint::idle() const {
  for (const auto& [key, lane] : lanes_)
    if (!lane->idle()) return false;
  return true;
}

std::unique_ptr<exec::StageLink::Transfer> ThreadedPointToPoint::start_send(const void* data, size_t bytes,
                                                                            int to) {
  return start(true, const_cast<void*>(data), bytes, to);
}

std::unique_ptr<exec::StageLink::Transfer> ThreadedPointToPoint::start_receive(void* data, size_t bytes,
                                                                               int from) {
  return start(false, data, bytes, from);
}

std::unique_ptr<exec::StageLink::Transfer> ThreadedPointToPoint::start(bool sending, void* data, size_t bytes,
                                                                       int peer) {
  auto& lane = lanes_[{peer, sending}];
  if (!lane) lane = std::make_unique<Lane>(sending ? send_ : receive_, peer);
  auto job = std::make_shared<Job>();
  job->data = data;
  job->bytes = bytes;
  lane->post(job);
  return std::make_unique<Transfer>(std::move(job));
}

}  // namespace tandem::host::train
