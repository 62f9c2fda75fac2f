// `tandem train --tensorboard DIR`: scalars appended to a TensorBoard event
// file in DIR as training logs them (tfevents.hpp has the format). Each run
// (a resumed one too) starts a new file; TensorBoard reads every file of the
// directory.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "report/tfevents.hpp"
#include "util/result.hpp"

namespace tandem::host::report {

class TensorBoardWriter {
 public:
  // Creates `dir` if needed and a new events.out.tfevents.<seconds>.<host>
  // in it (never an existing file: a suffix tells two of the same second
  // apart), which starts with the file-version event. An error names the
  // directory and errno's words.
  static Result<std::unique_ptr<TensorBoardWriter>> open(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One event of `scalars` at `step`, written through to the file at once
  // (so TensorBoard sees each log step while the run goes on). After a
  // failure nothing more is written; error() says what failed.
  void write(int64_t step, const std::vector<Scalar>& scalars);
  std::optional<std::string> error() const;
  const std::string& path() const { return path_; }

 private:
  TensorBoardWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  void write_record(const std::string& event);

  std::string path_;
  int fd_ = -1;
  std::string failure_;  // the first failure, with errno's words
};

}  // namespace tandem::host::report
