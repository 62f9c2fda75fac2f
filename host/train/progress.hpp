// What a person sees while training. On a terminal: one live line,
// rewritten in place (epoch, step/total, loss, accuracy, samples/s, data-wait
// share, ETA). In a pipe or a log file: a plain line every `log_every` steps.
// Also appends machine-readable records to <run-dir>/metrics.jsonl and,
// with `--tensorboard DIR`, the same figures as TensorBoard scalars.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "report/tensorboard_writer.hpp"
#include "util/result.hpp"

namespace tandem::host::train {

struct StepReport {
  int64_t epoch = 0, epochs = 0;      // 1-based epoch
  int64_t batch = 0, batches = 0;     // 1-based batch within the epoch
  int64_t step = 0, total_steps = 0;  // optimizer steps done, 1-based
  double loss = 0, accuracy = 0;      // running means over the epoch so far
  double lr = 0;
  double samples_per_second = 0;
  double data_wait_fraction = 0;  // share of step time spent waiting for data
  double eta_seconds = 0;
};

class Progress {
 public:
  // `silent`: print and record nothing (ranks other than 0).
  Progress(bool live, int64_t log_every, const std::string& metrics_path, bool silent = false);
  ~Progress();

  void step(const StepReport& r);
  // The step's line now, as a plain line, whatever log_every says (SIGUSR1).
  void status(const StepReport& r);
  // An epoch ended: its training figures plus evaluation results (< 0 = none).
  void epoch(const StepReport& r, double val_loss, double val_accuracy, double epoch_seconds);
  // A language model's evaluation also reports perplexity (exp of the mean
  // loss per token), and bits per byte when each token is a byte.
  void report_perplexity(bool bytes) {
    perplexity_ = true;
    bits_per_byte_ = bytes;
  }
  void line(const std::string& text);  // a plain message, never overwritten
  void record(const std::string& json_object);
  // One device's memory after training, in bytes: what the plan promised,
  // what its allocator held at most during the training steps, and with
  // evaluation (for tools: the terminal report rounds to 0.1 MiB).
  void memory(const std::string& device, uint64_t planned, uint64_t training_peak, uint64_t peak);
  // Why metrics.jsonl could not be opened or written (nothing: all well).
  std::optional<std::string> metrics_error() const;
  // `--tensorboard DIR`: from now on each logged step and each epoch's end
  // also go to a new event file in DIR (report/series.hpp names the
  // scalars). An error names DIR and why.
  Result<void> write_tensorboard_to(const std::string& dir);
  // The first failure of metrics.jsonl or of the event file, named.
  std::optional<std::string> output_error() const;

 private:
  void clear_live();
  void tensorboard_epoch(const StepReport& r, double val_loss, double val_accuracy);

  bool live_;
  int64_t log_every_;
  bool silent_;
  std::string metrics_path_;
  std::ofstream metrics_;
  std::string metrics_failure_;  // the first failure, with errno's words
  bool live_shown_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
  bool perplexity_ = false, bits_per_byte_ = false;
  std::unique_ptr<report::TensorBoardWriter> tensorboard_;
  int64_t tensorboard_step_ = -1;  // the last step whose training figures went to TensorBoard
};

std::string format_duration(double seconds);  // "1h02m", "3m05s", "12s"

}  // namespace tandem::host::train
