// Reference backend — cast between any two dtypes.
//
// Floating sources are read exactly as double, integer sources as int64.
// Into a floating dtype: rounded to nearest, ties to even (s64 values beyond
// 2^53 are first rounded to f64); NaN stays NaN, overflow gives ±inf.
// Into an integer dtype: from a float, rounded to nearest-even, saturated to
// the dtype's range, NaN -> 0; from an integer, saturated.
#include "common.hpp"

namespace tandem::reference {
namespace {

std::unique_ptr<Kernel> cast(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype from = c.primary_dtype(0, kAll);
  const tdm_dtype to = c.primary_output_dtype(0, kAll);
  const int64_t n = c.in(0).numel();
  return make_kernel(c, [=](void* const* in, void* const* out) {
    // Everything is read before anything is written, so an in-place launch
    // (same element size) is harmless.
    if (is_floating(from)) {
      std::vector<double> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[size_t(i)] = load_double(in[0], from, i);
      for (int64_t i = 0; i < n; ++i) store_double(out[0], to, i, v[size_t(i)]);
    } else {
      const std::vector<int64_t> v = load_indices(in[0], from, n);
      for (int64_t i = 0; i < n; ++i) store_int(out[0], to, i, v[size_t(i)]);
    }
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) { r.add("cast", cast); });

}  // namespace

}  // namespace tandem::reference
