// Tandem conformance kit — the result of one step, as a value.
//
// The kit never throws across its own API for an expected condition: a
// plugin that declines an op, a device that is absent, a file that does not
// load are all outcomes the driver reports and moves on from.
#ifndef TANDEM_CONFORMANCE_OUTCOME_HPP
#define TANDEM_CONFORMANCE_OUTCOME_HPP

#include <string>
#include <utility>

namespace tandem::conformance {

enum class Status {
  ok,
  unsupported,  // the plugin answered TDM_UNSUPPORTED (a normal answer)
  skipped,      // the device is not present on this machine (TDM_UNAVAILABLE)
  error,        // anything else: load failure, bad status, wrong result
};

struct Outcome {
  Status status = Status::ok;
  std::string message;  // empty when ok; otherwise what happened and why

  static Outcome success() { return {}; }
  static Outcome fail(std::string why) { return {Status::error, std::move(why)}; }
  bool ok() const noexcept { return status == Status::ok; }
};

const char* status_name(Status s) noexcept;

}  // namespace tandem::conformance

#endif
