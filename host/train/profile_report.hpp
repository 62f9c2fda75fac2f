// `--profile trace.json`: a Chrome/Perfetto trace of the run (every op
// launch on its device stream, and the time the step waited for data), and
// the end-of-run summary in the spirit of `caffe time`: time per op type,
// and forward / backward / optimizer / data wait.
#pragma once

#include <chrono>
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
  Result<void> write(const std::string& path, const Graph& graph, const exec::Executor& executor,
                     const std::string& device) const;
  void print_summary(std::ostream& out, const Graph& graph, const exec::Executor& executor) const;

 private:
  struct Span {
    std::chrono::steady_clock::time_point begin, end;
  };
  bool enabled_;
  std::vector<Span> waits_;
};

}  // namespace tandem::host::train
