// wait_until_finished: how a stage waits for a message on its way.
#include "exec/stage_link.hpp"

#include <chrono>
#include <thread>

namespace tandem::host::exec {

namespace {

Error no_device_memory() {
  return make_error("this pipeline's stage link does not move device memory (internal)", TDM_INTERNAL);
}

}  // namespace

Result<std::unique_ptr<StageLink::Transfer>> StageLink::start_device_send(const void*, size_t, int) {
  return no_device_memory();
}

Result<std::unique_ptr<StageLink::Transfer>> StageLink::start_device_receive(void*, size_t, int) {
  return no_device_memory();
}

Result<void> wait_until_finished(StageLink::Transfer& transfer, double timeout_seconds, int stage,
                                 const std::string& what) {
  using Clock = std::chrono::steady_clock;
  using namespace std::chrono_literals;
  const auto started = Clock::now();
  for (uint64_t asked = 0;; ++asked) {
    auto done = transfer.finished();
    if (!done)
      return make_error("pipeline stage " + std::to_string(stage) + ": " + what + ": " + done.error().message,
                        done.error().status);
    if (*done) return {};
    const auto waited = Clock::now() - started;
    if (timeout_seconds > 0 && (asked & 255) == 0 &&
        std::chrono::duration<double>(waited).count() > timeout_seconds)
      return make_error("pipeline stage " + std::to_string(stage) + " waited " +
                            std::to_string(int(timeout_seconds)) + " s for " + what +
                            " (the timeout, --comm-timeout): that stage is stuck, dead, or computing",
                        TDM_TIMEOUT);
    if (waited < 2ms)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(20us);
  }
}

}  // namespace tandem::host::exec
