// run_case: reference, candidate twice, bitwise rerun check, comparison.
#include "tandem/conformance/runner.hpp"

#include <cstdio>

namespace tandem::conformance {

const char* verdict(Status s) noexcept {
  switch (s) {
    case Status::ok:
      return "PASS";
    case Status::error:
      return "FAIL";
    case Status::unsupported:
      return "UNSUPPORTED";
    case Status::skipped:
      return "SKIPPED";
  }
  return "?";
}

namespace {

// First element whose bytes differ between two runs, or -1.
int64_t first_difference(const HostTensor& a, const HostTensor& b) {
  if (a.dims() != b.dims() || a.dtype() != b.dtype()) return 0;
  const size_t width = dtype_size(a.dtype());
  for (size_t i = 0; i < a.size_bytes(); ++i)
    if (a.data()[i] != b.data()[i]) return static_cast<int64_t>(i / (width ? width : 1));
  return -1;
}

CaseResult fail(std::string message) {
  CaseResult r;
  r.status = Status::error;
  r.message = std::move(message);
  return r;
}

}  // namespace

CaseResult run_case(PluginUnderTest& candidate, PluginUnderTest& reference, const Case& c) {
  const std::vector<HostTensor> inputs = make_inputs(c);
  RunResult expected = run_op(reference, c.op, c.attrs, inputs, c.outputs, c.options);
  if (!expected.outcome.ok())
    return fail(std::string("the reference could not run this case (") +
                status_name(expected.outcome.status) + "): " + expected.outcome.message);
  RunResult first = run_op(candidate, c.op, c.attrs, inputs, c.outputs, c.options);
  if (first.outcome.status == Status::unsupported) {
    CaseResult r;
    r.status = Status::unsupported;
    r.message = first.outcome.message;
    return r;
  }
  if (!first.outcome.ok()) return fail(first.outcome.message);
  RunResult second = run_op(candidate, c.op, c.attrs, inputs, c.outputs, c.options);
  if (!second.outcome.ok()) return fail("second run: " + second.outcome.message);

  CaseResult r;
  r.implementation = first.implementation;
  r.compared = true;
  double worst_ratio = -1;
  for (size_t o = 0; o < c.outputs.size(); ++o) {
    if (!expected.outputs[o].present()) continue;
    const int64_t diff = first_difference(first.outputs[o], second.outputs[o]);
    if (diff >= 0) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "not reproducible: output %zu element #%lld differs between two runs (%.9g vs %.9g)", o,
                    static_cast<long long>(diff), first.outputs[o].get(diff), second.outputs[o].get(diff));
      return fail(buf);
    }
    const Comparison cmp =
        compare(first.outputs[o], expected.outputs[o], tolerance(c.op, c.outputs[o].dtype, c.k));
    const double ratio = cmp.tol > 0 ? cmp.max_err / cmp.tol : (cmp.max_err > 0 ? 1e300 : 0);
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      r.max_err = cmp.max_err;
      r.tol = cmp.tol;
    }
    if (!cmp.pass) {
      r.status = Status::error;
      r.message +=
          (r.message.empty() ? "" : "; ") + std::string("output ") + std::to_string(o) + ": " + cmp.message;
    }
  }
  return r;
}

std::string report_line(const Case& c, const CaseResult& r) {
  char buf[96];
  std::string s = std::string(verdict(r.status)) + " " + c.op + " " + dtype_name(c.dtype) + " " + c.label();
  if (r.compared) {
    std::snprintf(buf, sizeof buf, "  max_err=%.3g tol=%.3g", r.max_err, r.tol);
    s += buf;
  }
  if (!r.message.empty()) s += "  (" + r.message + ")";
  return s;
}

}  // namespace tandem::conformance
