#include "plugin/call_window.hpp"

#include <functional>
#include <mutex>
#include <thread>

namespace tandem::host {
namespace {

struct Open {
  const void* object = nullptr;
  bool thread_set = false;
  unsigned long long thread = 0;
};

std::mutex& mutex() {
  static std::mutex m;
  return m;
}
Open& open(CallWindow::Kind kind) {
  static Open windows[3];
  return windows[kind];
}
unsigned long long this_thread() {
  return std::hash<std::thread::id>{}(std::this_thread::get_id());
}

}  // namespace

CallWindow::CallWindow(Kind kind, const void* object) noexcept : kind_(kind) {
  std::lock_guard lock(mutex());
  Open& w = open(kind);
  previous_object_ = w.object;
  previous_thread_set_ = w.thread_set;
  previous_thread_ = w.thread;
  w = {object, true, this_thread()};
}

CallWindow::~CallWindow() {
  std::lock_guard lock(mutex());
  open(kind_) = {previous_object_, previous_thread_set_, previous_thread_};
}

std::string CallWindow::refusal(Kind kind, const void* object, const char* function) {
  std::lock_guard lock(mutex());
  const Open& w = open(kind);
  if (object != nullptr && w.object == object && w.thread_set && w.thread == this_thread()) return "";
  const std::string f = function;
  if (kind == kGraphPass)
    return f +
           " outside a graph pass: a feature reads and edits the graph only during its graph_pass, "
           "on the thread the host called it on, through the graph it was given (sdk/ABI.md rule 43)";
  if (kind == kStepBoundary)
    return f +
           " outside a step boundary: whole tensors are read and written only during on_step_begin, "
           "on_step_end or on_run_end, on the thread the host called it on, through that hook's "
           "tdm_step_info.run (sdk/ABI.md rule 44)";
  return f +
         " outside a step hook: run scalars are read and written only during a step hook, on the thread "
         "the host called it on, through that hook's tdm_step_info.run (sdk/ABI.md rule 44)";
}

}  // namespace tandem::host
