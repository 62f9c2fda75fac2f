// Reference backend — softmax rows, shared by softmax / log_softmax and
// softmax_cross_entropy: a tensor seen as [outer, n, inner] around the axis,
// and the log-softmax of every row in double (shifted by the row maximum).
#ifndef TANDEM_REFERENCE_OPS_SOFTMAX_ROWS_HPP
#define TANDEM_REFERENCE_OPS_SOFTMAX_ROWS_HPP

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common.hpp"

namespace tandem::reference {

// A tensor seen as [outer, n, inner] around the softmax axis.
struct Rows {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t at(int64_t o, int64_t k, int64_t i) const { return (o * n + k) * inner + i; }
};

inline Rows rows_around(const Dims& dims, size_t axis) {
  Rows r;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d < axis) r.outer *= dims[d];
    if (d == axis) r.n = dims[d];
    if (d > axis) r.inner *= dims[d];
  }
  return r;
}

// log-softmax of every row, in double.
inline std::vector<double> log_softmax_rows(const std::vector<double>& x, const Rows& r) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t i = 0; i < r.inner; ++i) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < r.n; ++k) m = std::max(m, x[size_t(r.at(o, k, i))]);
      double sum = 0;
      for (int64_t k = 0; k < r.n; ++k) sum += std::exp(x[size_t(r.at(o, k, i))] - m);
      const double lse = m + std::log(sum);
      for (int64_t k = 0; k < r.n; ++k) y[size_t(r.at(o, k, i))] = x[size_t(r.at(o, k, i))] - lse;
    }
  return y;
}

}  // namespace tandem::reference

#endif  // TANDEM_REFERENCE_OPS_SOFTMAX_ROWS_HPP
