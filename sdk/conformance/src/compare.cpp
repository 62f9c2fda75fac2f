// Element-wise comparison with the worst element reported.
#include "tandem/conformance/compare.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

namespace tandem::conformance {

Comparison compare(const HostTensor& got, const HostTensor& expected, double tol) {
  Comparison c;
  c.tol = tol;
  if (got.dtype() != expected.dtype() || got.dims() != expected.dims()) {
    c.pass = false;
    c.max_err = std::numeric_limits<double>::infinity();
    c.message = "output is " + got.str() + ", expected " + expected.str();
    return c;
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.get(i), e = expected.get(i);
    double err;
    if (std::isnan(g) || std::isnan(e)) {
      err = std::numeric_limits<double>::infinity();  // NaN never passes
    } else if (g == e) {
      err = 0;  // also equal infinities
    } else {
      err = std::fabs(g - e) / std::fmax(1.0, std::fabs(e));
      if (std::isnan(err)) err = std::numeric_limits<double>::infinity();
    }
    if (c.worst_index < 0 || err > c.max_err) {
      c.max_err = err;
      c.worst_index = i;
      c.got = g;
      c.expected = e;
    }
  }
  c.pass = !(c.max_err > tol);
  if (!c.pass) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "worst element #%lld: got %.9g expected %.9g err %.3g > tol %.3g",
                  static_cast<long long>(c.worst_index), c.got, c.expected, c.max_err, tol);
    c.message = buf;
    if (std::isnan(c.got)) c.message += " (NaN: never written, or a computation gone wrong)";
  }
  return c;
}

}  // namespace tandem::conformance
