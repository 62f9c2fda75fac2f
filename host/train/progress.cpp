#include "train/progress.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "report/series.hpp"

namespace tandem::host::train {
namespace {

std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::string summary(const StepReport& r) {
  return "epoch " + std::to_string(r.epoch) + "/" + std::to_string(r.epochs) + " step " +
         std::to_string(r.batch) + "/" + std::to_string(r.batches) + " loss " + fixed(r.loss, 4) + " acc " +
         fixed(100 * r.accuracy, 2) + "% " + fixed(r.samples_per_second, 0) + " samples/s data wait " +
         fixed(100 * r.data_wait_fraction, 0) + "% ETA " + format_duration(r.eta_seconds);
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char b[32];
  if (s >= 3600)
    std::snprintf(b, sizeof b, "%ldh%02ldm", long(s / 3600), long(s / 60 % 60));
  else if (s >= 60)
    std::snprintf(b, sizeof b, "%ldm%02lds", long(s / 60), long(s % 60));
  else
    std::snprintf(b, sizeof b, "%lds", long(s));
  return b;
}

Progress::Progress(bool live, int64_t log_every, const std::string& metrics_path, bool silent)
    : live_(live && !silent),
      log_every_(log_every > 0 ? log_every : 50),
      silent_(silent),
      metrics_path_(metrics_path) {
  if (metrics_path.empty()) return;
  errno = 0;
  metrics_.open(metrics_path, std::ios::app);
  if (!metrics_) metrics_failure_ = std::string("cannot open it (") + std::strerror(errno) + ")";
}

std::optional<std::string> Progress::metrics_error() const {
  if (metrics_failure_.empty()) return std::nullopt;
  return metrics_path_ + ": " + metrics_failure_;
}

Result<void> Progress::write_tensorboard_to(const std::string& dir) {
  if (silent_) return {};
  auto writer = report::TensorBoardWriter::open(dir);
  if (!writer) return writer.error();
  tensorboard_ = std::move(*writer);
  return {};
}

std::optional<std::string> Progress::output_error() const {
  if (auto why = metrics_error()) return why;
  if (tensorboard_) return tensorboard_->error();
  return std::nullopt;
}

Progress::~Progress() {
  clear_live();
}

void Progress::clear_live() {
  if (live_shown_) std::cout << "\r\033[K" << std::flush;
  live_shown_ = false;
}

void Progress::record(const std::string& json_object) {
  if (!metrics_.is_open()) return;  // a rank that does not report
  errno = 0;
  metrics_ << json_object << '\n' << std::flush;
  if (!metrics_ && metrics_failure_.empty())
    metrics_failure_ =
        std::string("a write failed (") + (errno != 0 ? std::strerror(errno) : "stream error") + ")";
}

void Progress::memory(const std::string& device, uint64_t planned, uint64_t training_peak, uint64_t peak) {
  record(nlohmann::json{
      {"event", "memory"},
      {"device", device},
      {"planned_bytes", planned},
      {"training_peak_bytes", training_peak},
      {"peak_bytes",
       peak}}.dump());
}

void Progress::step(const StepReport& r) {
  if (silent_) return;
  const bool periodic = r.step % log_every_ == 0;
  if (periodic) {
    record(nlohmann::json{{"event", "step"},
                          {"step", r.step},
                          {"epoch", r.epoch},
                          {"loss", r.loss},
                          {"accuracy", r.accuracy},
                          {"lr", r.lr},
                          {"samples_per_second", r.samples_per_second},
                          {"data_wait_fraction", r.data_wait_fraction}}
               .dump());
    if (tensorboard_) {
      namespace s = report::series;
      tensorboard_->write(r.step, {{s::kTrainLoss, static_cast<float>(r.loss)},
                                   {s::kTrainAccuracy, static_cast<float>(r.accuracy)},
                                   {s::kLearningRate, static_cast<float>(r.lr)},
                                   {s::kSamplesPerSecond, static_cast<float>(r.samples_per_second)},
                                   {s::kDataWait, static_cast<float>(r.data_wait_fraction)}});
      tensorboard_step_ = r.step;
    }
  }
  if (live_) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(100) && r.batch != r.batches) return;
    last_draw_ = now;
    std::cout << "\r\033[K" << summary(r) << std::flush;
    live_shown_ = true;
  } else if (periodic) {
    std::cout << summary(r) << std::endl;
  }
}

void Progress::status(const StepReport& r) {
  if (silent_) return;
  clear_live();
  std::cout << summary(r) << std::endl;
}

void Progress::epoch(const StepReport& r, double val_loss, double val_accuracy, double epoch_seconds) {
  if (silent_) return;
  clear_live();
  std::string text = "epoch " + std::to_string(r.epoch) + "/" + std::to_string(r.epochs) + " done in " +
                     format_duration(epoch_seconds) + ": train loss " + fixed(r.loss, 4) + " acc " +
                     fixed(100 * r.accuracy, 2) + "%, " + fixed(r.samples_per_second, 0) +
                     " samples/s, data wait " + fixed(100 * r.data_wait_fraction, 1) + "% of step time";
  if (val_accuracy >= 0) {
    text += "; eval loss " + fixed(val_loss, 4) + " acc " + fixed(100 * val_accuracy, 2) + "%";
    if (perplexity_) text += ", perplexity " + fixed(std::exp(val_loss), 2);
    if (bits_per_byte_) text += ", " + fixed(val_loss / std::log(2.0), 3) + " bits/byte";
  }
  std::cout << text << std::endl;
  nlohmann::json j{{"event", "epoch"},
                   {"epoch", r.epoch},
                   {"step", r.step},
                   {"train_loss", r.loss},
                   {"train_accuracy", r.accuracy},
                   {"samples_per_second", r.samples_per_second},
                   {"data_wait_fraction", r.data_wait_fraction},
                   {"seconds", epoch_seconds}};
  if (val_accuracy >= 0) {
    j["eval_loss"] = val_loss;
    j["eval_accuracy"] = val_accuracy;
    if (perplexity_) j["eval_perplexity"] = std::exp(val_loss);
    if (bits_per_byte_) j["eval_bits_per_byte"] = val_loss / std::log(2.0);
  }
  record(j.dump());
  tensorboard_epoch(r, val_loss, val_accuracy);
}

// As `tandem report` reads the epoch record: its training figures only
// where no logged step gave them already, its evaluation always.
void Progress::tensorboard_epoch(const StepReport& r, double val_loss, double val_accuracy) {
  if (!tensorboard_) return;
  namespace s = report::series;
  std::vector<report::Scalar> scalars;
  if (r.step != tensorboard_step_)
    scalars = {{s::kTrainLoss, static_cast<float>(r.loss)},
               {s::kTrainAccuracy, static_cast<float>(r.accuracy)},
               {s::kSamplesPerSecond, static_cast<float>(r.samples_per_second)},
               {s::kDataWait, static_cast<float>(r.data_wait_fraction)}};
  if (val_accuracy >= 0) {
    scalars.push_back({s::kEvalLoss, static_cast<float>(val_loss)});
    scalars.push_back({s::kEvalAccuracy, static_cast<float>(val_accuracy)});
    if (perplexity_) scalars.push_back({s::kEvalPerplexity, static_cast<float>(std::exp(val_loss))});
    if (bits_per_byte_)
      scalars.push_back({s::kEvalBitsPerByte, static_cast<float>(val_loss / std::log(2.0))});
  }
  tensorboard_->write(r.step, scalars);
  tensorboard_step_ = r.step;
}

void Progress::line(const std::string& text) {
  if (silent_) return;
  clear_live();
  std::cout << text << std::endl;
}

}  // namespace tandem::host::train
