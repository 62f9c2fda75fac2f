// Tandem SDK — shape arithmetic every backend needs at prepare time, part of
// the header-only C++ helper: element counts, dense strides, numpy
// broadcasting (sdk/ops.md's rule) and shape text for messages.
#ifndef TANDEM_SHAPE_UTIL_HPP
#define TANDEM_SHAPE_UTIL_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/tandem.hpp"

namespace tandem {

using Dims = std::vector<int64_t>;

// A floating-point dtype (f32, f64, f16, bf16).
inline bool is_floating(tdm_dtype dtype) noexcept {
  return dtype == TDM_F32 || dtype == TDM_F64 || dtype == TDM_F16 || dtype == TDM_BF16;
}

// "[2,3]"
inline std::string dims_str(const Dims& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ",";
    s += std::to_string(dims[i]);
  }
  s += "]";
  return s;
}

// "f32[2,3]"
inline std::string shape_str(const TensorShape& t) {
  return t.str();
}

inline int64_t numel(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Row-major strides in elements.
inline Dims strides_of(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

// numpy broadcasting: shapes right-aligned, each dim pair equal or one of
// them 1. False (out unspecified) when a and b do not broadcast.
inline bool broadcast_shapes(const Dims& a, const Dims& b, Dims& out) {
  const size_t rank = a.size() > b.size() ? a.size() : b.size();
  out.assign(rank, 1);
  for (size_t k = 0; k < rank; ++k) {  // k counts from the last dim
    const int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    const int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1) return false;
    out[rank - 1 - k] = da == 1 ? db : da;
  }
  return true;
}

}  // namespace tandem

#endif  // TANDEM_SHAPE_UTIL_HPP
