// Tandem conformance kit — one case, candidate against reference.
//
// The case's inputs are drawn once; the reference computes the expected
// outputs; the candidate runs twice and must give bitwise identical outputs
// (reproducibility, as benchdnn requires), then every output is compared
// with the tolerance of its op class and dtype.
#ifndef TANDEM_CONFORMANCE_RUNNER_HPP
#define TANDEM_CONFORMANCE_RUNNER_HPP

#include <string>

#include "tandem/conformance/cases.hpp"
#include "tandem/conformance/compare.hpp"

namespace tandem::conformance {

struct CaseResult {
  Status status = Status::ok;  // ok = PASS, error = FAIL, unsupported
  bool compared = false;       // the outputs were compared (not a failure before that)
  double max_err = 0;          // of the output closest to failing
  double tol = 0;
  std::string message;         // FAIL: what and where; UNSUPPORTED: the plugin's reason
  std::string implementation;  // candidate's kernel_describe, if any
};

CaseResult run_case(PluginUnderTest& candidate, PluginUnderTest& reference, const Case& c);

// "PASS", "FAIL", "UNSUPPORTED", "SKIPPED"
const char* verdict(Status s) noexcept;

// One report line: "PASS matmul f32 7x13,13x5  max_err=1.2e-07 tol=2.7e-06"
std::string report_line(const Case& c, const CaseResult& r);

}  // namespace tandem::conformance

#endif
