// Tandem conformance kit — owned host tensors and their element values.
//
// A HostTensor is a dtype, a shape and the raw bytes exactly as a device
// holds them. Values are read and written as double; narrow floats are
// converted here (round to nearest, ties to even, as the catalog requires)
// so the kit depends on nothing but the standard library.
#ifndef TANDEM_CONFORMANCE_HOST_TENSOR_HPP
#define TANDEM_CONFORMANCE_HOST_TENSOR_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/backend_kit.hpp"
#include "tandem/half.hpp"

namespace tandem::conformance {

using tandem::TensorShape;

// Scalar conversions for the 16-bit floats: the SDK's (tandem/half.hpp,
// nearest-even), so the kit rounds exactly as the backends do.
using tandem::bf16_to_f32;
using tandem::f16_to_f32;
using tandem::f32_to_bf16;
using tandem::f32_to_f16;

using tandem::is_floating;

// Deterministic generator (splitmix64): identical streams on every platform,
// unlike the distributions of <random>.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() noexcept;
  double uniform(double lo, double hi) noexcept;     // [lo, hi)
  int64_t integer(int64_t lo, int64_t hi) noexcept;  // [lo, hi]

 private:
  uint64_t state_;
};

// How to draw a tensor's values so the test means something.
struct Fill {
  enum Kind {
    uniform,   // uniform in [lo, hi)
    distinct,  // no two equal values in one [H,W] plane (max_pool: no ties);
               // integers, exact in every dtype for planes up to 256 values
    integers,  // integers in [lo, hi] (labels, indices, masks, s32 data)
    constant,  // every element = lo
  };
  Kind kind = uniform;
  double lo = -1.0;
  double hi = 1.0;

  static Fill range(double lo, double hi) { return {uniform, lo, hi}; }
  static Fill positive() { return {uniform, 0.5, 2.0}; }
  static Fill no_ties() { return {distinct, 0, 0}; }
  static Fill ints(int64_t lo, int64_t hi) { return {integers, double(lo), double(hi)}; }
  static Fill value(double v) { return {constant, v, v}; }
};

class HostTensor {
 public:
  HostTensor() = default;  // absent (an optional input left out)
  // Zero-filled. A negative dimension makes a tensor of no elements that
  // still describes itself with that shape (to test that it is refused).
  HostTensor(tdm_dtype dtype, std::vector<int64_t> dims);
  explicit HostTensor(const TensorShape& shape) : HostTensor(shape.dtype, shape.dims) {}
  static HostTensor from_values(tdm_dtype dtype, std::vector<int64_t> dims,
                                const std::vector<double>& values);
  static HostTensor random(const TensorShape& shape, const Fill& fill, Rng& rng);

  bool present() const noexcept { return dtype_ != TDM_DTYPE_INVALID; }
  tdm_dtype dtype() const noexcept { return dtype_; }
  const std::vector<int64_t>& dims() const noexcept { return dims_; }
  TensorShape shape() const { return TensorShape(dtype_, dims_); }
  int64_t numel() const noexcept;
  size_t size_bytes() const noexcept { return bytes_.size(); }
  uint8_t* data() noexcept { return bytes_.data(); }
  const uint8_t* data() const noexcept { return bytes_.data(); }

  double get(int64_t index) const noexcept;        // element as double
  void set(int64_t index, double value) noexcept;  // rounded to the dtype
  std::vector<double> to_f64() const;
  HostTensor cast(tdm_dtype dtype) const;
  bool bitwise_equal(const HostTensor& other) const noexcept;
  std::string str() const;  // "f32[2,3]"

 private:
  tdm_dtype dtype_ = TDM_DTYPE_INVALID;
  std::vector<int64_t> dims_;
  std::vector<uint8_t> bytes_;
};

std::string dims_str(const std::vector<int64_t>& dims);  // "2x3x5"; "[]" for a scalar

}  // namespace tandem::conformance

#endif
