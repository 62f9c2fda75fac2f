// Reference backend — what every op file shares: prepare-time validation
// (Check), the one kernel class (FnKernel), compute-type dispatch and
// loading/storing tensors in any dtype.
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
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tandem/shape_util.hpp"
#include "tandem/tandem.hpp"

namespace tandem::reference {

// Dtype sets of the catalog's "dtypes" column, with f64 added (reference
// accepts f64 for every floating op).
inline const std::vector<tdm_dtype> kFloat = {TDM_F32, TDM_BF16, TDM_F16, TDM_F64};
inline const std::vector<tdm_dtype> kF32Bf16 = {TDM_F32, TDM_BF16, TDM_F64};
inline const std::vector<tdm_dtype> kF32 = {TDM_F32, TDM_F64};
inline const std::vector<tdm_dtype> kAll = {TDM_F32, TDM_F64, TDM_F16, TDM_BF16,
                                            TDM_S8,  TDM_U8,  TDM_S32, TDM_S64};

bool is_floating(tdm_dtype dtype);
// Flat index, in a tensor of shape `in` broadcast to `out`, of the element
// that feeds output element `out_flat`.
int64_t broadcast_source(int64_t out_flat, const Dims& out, const Dims& in);

// Prepare-time validation. Every message starts with where(): the op and,
// when the host gave one, the graph node ("op 'linear' (node 'fc1')").
class Check {
 public:
  explicit Check(const OpView& op) : op_(op) {}

  const OpView& op() const { return op_; }
  std::string where() const;
  [[noreturn]] void fail(const std::string& what) const;        // TDM_INVALID_ARGUMENT
  [[noreturn]] void unsupported(const std::string& why) const;  // TDM_UNSUPPORTED

  // Input/output counts within [min, max].
  void counts(size_t min_in, size_t max_in, size_t min_out, size_t max_out) const;
  // An optional slot is absent when it is missing or its dtype is INVALID.
  bool has_input(size_t i) const;
  bool has_output(size_t j) const;
  const TensorShape& in(size_t i) const { return op_.inputs().at(i); }
  const TensorShape& out(size_t j) const { return op_.outputs().at(j); }

  // The dtype that selects the implementation: must be one of `allowed`,
  // else TDM_UNSUPPORTED. Returns it.
  tdm_dtype primary_dtype(size_t input, const std::vector<tdm_dtype>& allowed) const;
  // Same checks for a primary output (ops with no input: fill).
  tdm_dtype primary_output_dtype(size_t output, const std::vector<tdm_dtype>& allowed) const;
  // A tensor whose dtype is fixed by the signature: TDM_INVALID_ARGUMENT otherwise.
  void input_dtype(size_t i, const std::vector<tdm_dtype>& allowed) const;
  void output_dtype(size_t j, const std::vector<tdm_dtype>& allowed) const;
  void input_shape(size_t i, const Dims& expected) const;
  void output(size_t j, tdm_dtype dtype, const Dims& expected) const;
  void input_rank(size_t i, size_t rank) const;
  void input_rank_at_least(size_t i, size_t rank) const;

  // Attributes, with range checks where the catalog has one.
  int64_t int_attr(const char* name, int64_t fallback) const { return op_.int_attr(name, fallback); }
  double float_attr(const char* name, double fallback) const { return op_.float_attr(name, fallback); }
  std::string string_attr(const char* name, const std::string& f) const { return op_.string_attr(name, f); }
  // An `ints` attribute with exactly two entries (one is repeated).
  std::vector<int64_t> pair_attr(const char* name, std::vector<int64_t> fallback) const;
  std::vector<int64_t> ints_attr(const char* name, std::vector<int64_t> fallback) const {
    return op_.ints_attr(name, std::move(fallback));
  }
  // Normalises a possibly negative axis into [0, rank).
  size_t axis(int64_t axis, size_t rank, const char* what) const;

 private:
  std::string tensor_name(bool input, size_t index) const;
  const OpView& op_;
};

// The only kernel type: a closure over what prepare validated.
class FnKernel final : public Kernel {
 public:
  using Fn = std::function<void(void* const* in, void* const* out)>;
  FnKernel(std::string name, Fn fn) : name_("reference:" + std::move(name)), fn_(std::move(fn)) {}
  void launch(Stream&, void* const* in, void* const* out, void*) override { fn_(in, out); }
  const char* describe() const noexcept override { return name_.c_str(); }

 private:
  std::string name_;
  Fn fn_;
};

inline std::unique_ptr<Kernel> make_kernel(const Check& c, FnKernel::Fn fn) {
  return std::make_unique<FnKernel>(c.op().op(), std::move(fn));
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

// Registration of each op family (one per ops/*.cpp).
using Factory = std::unique_ptr<Kernel> (*)(const OpView&, size_t& workspace);
using Registrar = std::function<void(const char* name, Factory)>;
void register_matmul_linear(const Registrar& add);
void register_conv(const Registrar& add);
void register_pool(const Registrar& add);
void register_activation(const Registrar& add);
void register_softmax_loss(const Registrar& add);
void register_norm(const Registrar& add);
void register_embedding(const Registrar& add);
void register_dropout(const Registrar& add);
void register_elementwise(const Registrar& add);
void register_reduce(const Registrar& add);
void register_shape(const Registrar& add);
void register_cast(const Registrar& add);
void register_optimizer(const Registrar& add);
void register_quantize(const Registrar& add);

}  // namespace tandem::reference

#endif  // TANDEM_REFERENCE_OPS_COMMON_HPP
