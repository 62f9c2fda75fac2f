// The pipeline's point to point over a comm plugin of ABI 1.15, which has
// only a blocking send and recv (host/train/threaded_point_to_point.hpp):
// two stages in one process joined by an in-memory blocking channel per
// direction, as such a plugin would join them across processes.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "train/threaded_point_to_point.hpp"

namespace tandem::host::train {
namespace {

using namespace std::chrono_literals;

// One direction between two stages: a send blocks until the receiver took
// the message, as a rendezvous protocol does.
class Channel {
 public:
  Result<void> send(const void* data, size_t bytes) {
    std::unique_lock lock(mutex_);
    if (broken_) return make_error("the channel broke", TDM_INTERNAL);
    queue_.emplace_back(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
    changed_.notify_all();
    changed_.wait(lock, [&] { return queue_.empty(); });
    return {};
  }
  Result<void> receive(void* data, size_t bytes) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !queue_.empty() || broken_; });
    if (queue_.empty()) return make_error("the channel broke", TDM_INTERNAL);
    if (queue_.front().size() != bytes) return make_error("a message of another size", TDM_INTERNAL);
    std::memcpy(data, queue_.front().data(), bytes);
    queue_.pop_front();
    changed_.notify_all();
    return {};
  }
  void hold(bool on) {
    std::lock_guard lock(mutex_);
    held_ = on;
  }
  void wait_while_held() {
    for (;;) {
      {
        std::lock_guard lock(mutex_);
        if (!held_) return;
      }
      std::this_thread::sleep_for(1ms);
    }
  }
  void breaks() {
    std::lock_guard lock(mutex_);
    broken_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::vector<char>> queue_;
  bool held_ = false, broken_ = false;
};

// Stage `self` of two: sends on out, receives on in.
ThreadedPointToPoint stage_end(Channel& out, Channel& in) {
  return ThreadedPointToPoint([&out](void* data, size_t bytes, int) { return out.send(data, bytes); },
                              [&in](void* data, size_t bytes, int) {
                                in.wait_while_held();
                                return in.receive(data, bytes);
                              });
}

bool finishes(exec::StageLink::Transfer& t) {
  for (int i = 0; i < 5000; ++i) {
    auto done = t.finished();
    if (!done) return false;
    if (*done) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

TEST(ThreadedPointToPoint, MessagesArriveWholeAndInTheOrderStartedBothWaysAtOnce) {
  Channel forward, backward;
  ThreadedPointToPoint first = stage_end(forward, backward), second = stage_end(backward, forward);
  constexpr int kMessages = 8;
  std::vector<std::vector<int>> to_second(kMessages), to_first(kMessages), at_second(kMessages),
      at_first(kMessages);
  std::vector<std::unique_ptr<exec::StageLink::Transfer>> transfers;
  for (int m = 0; m < kMessages; ++m) {  // every receive started before any send
    at_second[m].assign(1000 + m, -1);
    at_first[m].assign(2000 + m, -1);
    transfers.push_back(second.start_receive(at_second[m].data(), at_second[m].size() * sizeof(int), 0));
    transfers.push_back(first.start_receive(at_first[m].data(), at_first[m].size() * sizeof(int), 1));
  }
  for (int m = 0; m < kMessages; ++m) {
    to_second[m].assign(1000 + m, m);
    to_first[m].assign(2000 + m, 100 + m);
    transfers.push_back(first.start_send(to_second[m].data(), to_second[m].size() * sizeof(int), 1));
    transfers.push_back(second.start_send(to_first[m].data(), to_first[m].size() * sizeof(int), 0));
  }
  for (auto& t : transfers) ASSERT_TRUE(finishes(*t));
  EXPECT_EQ(at_second, to_second);
  EXPECT_EQ(at_first, to_first);
  EXPECT_TRUE(first.idle());
  EXPECT_TRUE(second.idle());
}

TEST(ThreadedPointToPoint, AStartReturnsAtOnceAndFinishesOnlyWhenTheMessageArrived) {
  Channel forward, backward;
  forward.hold(true);  // the receiving stage is busy elsewhere
  ThreadedPointToPoint first = stage_end(forward, backward), second = stage_end(backward, forward);
  std::vector<int> message(4096, 7), got(4096, 0);
  const auto started = std::chrono::steady_clock::now();
  auto receive = second.start_receive(got.data(), got.size() * sizeof(int), 0);
  auto send = first.start_send(message.data(), message.size() * sizeof(int), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);  // nothing waited for the peer
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(*send->finished());
  EXPECT_FALSE(*receive->finished());
  EXPECT_FALSE(first.idle());
  forward.hold(false);
  ASSERT_TRUE(finishes(*receive));
  ASSERT_TRUE(finishes(*send));
  EXPECT_EQ(got, message);
}

TEST(ThreadedPointToPoint, AFailureIsReportedAndNothingMovesAfterIt) {
  Channel forward, backward;
  ThreadedPointToPoint first = stage_end(forward, backward), second = stage_end(backward, forward);
  forward.breaks();
  std::vector<int> a(16, 1), b(16, 2);
  auto lost = second.start_receive(a.data(), a.size() * sizeof(int), 0);
  auto next = second.start_receive(b.data(), b.size() * sizeof(int), 0);
  for (auto* t : {lost.get(), next.get()}) {
    Result<bool> done = false;
    for (int i = 0; i < 5000 && done && !*done; ++i) {
      done = t->finished();
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_FALSE(done);  // an error, not a message
  }
  EXPECT_NE(lost->finished().error().message.find("the channel broke"), std::string::npos);
  // The next one would have taken a later message for the lost one: it is not even tried.
  EXPECT_NE(next->finished().error().message.find("an earlier message"), std::string::npos);
  EXPECT_EQ(b, std::vector<int>(16, 2));
}

TEST(ThreadedPointToPoint, OneLeftWaitingOnAPeerDoesNotHoldUpItsOwnerEnding) {
  // What the waiting thread uses is never freed, as after a failed run.
  auto* forward = new Channel;
  auto* backward = new Channel;
  auto* got = new std::vector<int>(16);
  const auto started = std::chrono::steady_clock::now();
  {
    ThreadedPointToPoint second = stage_end(*backward, *forward);
    auto waiting = second.start_receive(got->data(), got->size() * sizeof(int), 0);  // no one ever sends
    std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(second.idle());
    EXPECT_FALSE(*waiting->finished());
  }  // its thread is left to the process; the destructor returns
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
}

}  // namespace
}  // namespace tandem::host::train
