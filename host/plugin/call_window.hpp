// What a feature plugin may touch only while the host calls it (sdk/ABI.md
// rules 43 and 44): the graph of the pass that runs, and the run scalars of
// the step hook that runs, on the thread the host called it on. The host
// opens a window around each such call; a call into the graph or run-scalar
// API on anything else (a graph kept after the pass, a tdm_run* kept after
// the hook, a helper thread) is refused with the rule instead of quietly
// working on whatever the pointer reaches then.
#pragma once

#include <string>

namespace tandem::host {

class CallWindow {
 public:
  // kStepBoundary: a step hook between optimizer steps (on_step_begin,
  // on_step_end, on_run_end), where whole tensors may be read and written;
  // the host opens it inside the kStepHook window of those hooks.
  enum Kind { kGraphPass = 0, kStepHook = 1, kStepBoundary = 2 };
  // Opens the window of `kind` on `object` for the calling thread until
  // destroyed (then the previous one, if any, is open again).
  CallWindow(Kind kind, const void* object) noexcept;
  ~CallWindow();
  CallWindow(const CallWindow&) = delete;
  CallWindow& operator=(const CallWindow&) = delete;

  // Why `function` on `object` from this thread is outside the window of
  // `kind`; empty when it is inside.
  static std::string refusal(Kind kind, const void* object, const char* function);

 private:
  Kind kind_;
  const void* previous_object_;
  bool previous_thread_set_;
  unsigned long long previous_thread_;
};

}  // namespace tandem::host
