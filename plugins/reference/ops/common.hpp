// Reference backend — what every op file shares, on top of the SDK's backend
// kit (tandem/backend_kit.hpp: Check, the registry, closure kernels):
// compute-type dispatch and loading/storing tensors in any dtype.
//
// Numerics (see sdk/ops.md "Conventions"): an op runs in a compute type T,
// double when its floating tensors are f64 and float otherwise (f16/bf16 are
// widened to float on load and rounded to nearest-even on store). Sums over
// many terms (dot products, reductions, norms) accumulate in double whatever
// T is: it costs nothing here and keeps the oracle's own error far below any
// backend's tolerance.
#ifndef TANDEM_REFERENCE_OPS_COMMON_HPP
#define TANDEM_REFERENCE_OPS_COMMON_HPP

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tandem/backend_kit.hpp"

namespace tandem::reference {

// Dtype sets of the catalog's "dtypes" column, with f64 added (reference
// accepts f64 for every floating op).
inline const std::vector<tdm_dtype> kFloat = {TDM_F32, TDM_BF16, TDM_F16, TDM_F64};
inline const std::vector<tdm_dtype> kF32Bf16 = {TDM_F32, TDM_BF16, TDM_F64};
inline const std::vector<tdm_dtype> kF32 = {TDM_F32, TDM_F64};
inline const std::vector<tdm_dtype> kAll = {TDM_F32, TDM_F64, TDM_F16, TDM_BF16,
                                            TDM_S8,  TDM_U8,  TDM_S32, TDM_S64};

// Flat index, in a tensor of shape `in` broadcast to `out`, of the element
// that feeds output element `out_flat`.
int64_t broadcast_source(int64_t out_flat, const Dims& out, const Dims& in);

// The SDK's Check, naming this backend in every message.
class Check : public tandem::Check {
 public:
  explicit Check(const OpView& op) : tandem::Check(op, "reference") {}
};

// Every kernel is a closure over what prepare validated, described as
// "reference:<op>".
template <class Fn>
std::unique_ptr<Kernel> make_kernel(const Check& c, Fn fn) {
  return make_fn_kernel("reference:" + c.op().op(), std::move(fn));
}

// Calls body(T{}) with T = double for f64 and float for every other dtype.
template <class Body>
decltype(auto) with_compute_type(tdm_dtype dtype, Body&& body) {
  if (dtype == TDM_F64) return body(double{});
  return body(float{});
}

// Element access in any dtype. Floating values go through double (exact),
// integers through int64_t.
double load_double(const void* data, tdm_dtype dtype, int64_t i);
int64_t load_int(const void* data, tdm_dtype dtype, int64_t i);
// Stores with the catalog's cast rules: floats round to nearest-even; into an
// integer dtype the value is rounded to nearest-even, saturated, NaN -> 0.
void store_double(void* data, tdm_dtype dtype, int64_t i, double value);
// Integer store: saturates to the dtype's range (floats: nearest).
void store_int(void* data, tdm_dtype dtype, int64_t i, int64_t value);

// Whole-tensor load into the compute type, and rounding store back. Loading
// everything before storing anything makes in-place launches safe.
template <class T>
std::vector<T> load(const void* data, tdm_dtype dtype, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = static_cast<T>(load_double(data, dtype, i));
  return v;
}
template <class T>
void store(void* data, tdm_dtype dtype, const std::vector<T>& v) {
  for (size_t i = 0; i < v.size(); ++i) store_double(data, dtype, int64_t(i), static_cast<double>(v[i]));
}
std::vector<int64_t> load_indices(const void* data, tdm_dtype dtype, int64_t n);

// The `epsilon` attribute of the normalisations (layer_norm, batch_norm),
// which the catalog holds to >= 0.
inline double epsilon_attr(const Check& c) {
  return c.float_attr("epsilon", 1e-5);
}

// Registration: each section of sdk/ops.md is one ops/<stem>.cpp, whose
// register function adds one registry entry per op and enlists itself in
// sections() while the library loads (registry.cpp builds the registry).
using Registry = KernelRegistry<>;
SectionList<Registry>& sections();
const Registry& registry();

}  // namespace tandem::reference

#endif  // TANDEM_REFERENCE_OPS_COMMON_HPP
