// `--profile trace.json`: a Chrome/Perfetto trace of the run (every op
// launch on the stream of the device that ran it, with its node, layer and
// the backend's description of its kernel, and the time the step waited
// for data), and
// the end-of-run summary in the spirit of `caffe time`: time per op type,
// and forward / backward / optimizer / data wait.
#pragma once

#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include "exec/executor.hpp"
#include "graph/graph.hpp"

namespace tandem::host::train {

class ProfileRecorder {
 public:
  explicit ProfileRecorder(bool enabled) : enabled_(enabled) {}

  void data_wait(std::chrono::steady_clock::time_point begin, std::chrono::steady_clock::time_point end);
  // Data parallelism: one bucket's all-reduce on the communication thread,
  // or on a GPU's comm stream as the host saw it (from its enqueue, or the
  // previous bucket's end, to its done event's completion:
  // streamed_allreduce.hpp); `backward_done` is when that step's backward
  // ended (--profile synchronises every node, so also on a GPU), so the part
  // of the span before it was hidden behind computation.
  void all_reduce(std::chrono::steady_clock::time_point begin, std::chrono::steady_clock::time_point end,
                  size_t bytes, std::chrono::steady_clock::time_point backward_done);
  // `device`: the run's device, the track of nodes no placement moved.
  Result<void> write(const std::string& path, const Graph& graph, const exec::Executor& executor,
                     const std::string& device) const;
  void print_summary(std::ostream& out, const Graph& graph, const exec::Executor& executor) const;

 private:
  struct Span {
    std::chrono::steady_clock::time_point begin, end;
  };
  struct CommSpan {
    Span span;
    size_t bytes;
    std::chrono::steady_clock::time_point backward_done;
  };
  void print_all_reduce(std::ostream& out) const;

  bool enabled_;
  std::vector<Span> waits_;
  std::vector<CommSpan> all_reduces_;
};

}  // namespace tandem::host::train
