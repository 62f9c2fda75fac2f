// oneDNN backend — cast (every dtype pair): own code.
//
// Each (src, dst) pair is its own template instance, so the inner loop has no
// switch. f32 <-> bf16 use the bit-level round-to-nearest-even; anything with
// f16 or f64 goes through double, which holds every source value exactly, and
// is rounded once by tandem/half.hpp as the catalog requires (s64 ->
// floating is rounded to f64 first, as the catalog says).
#include <cmath>
#include <limits>

#include "common.hpp"

namespace tandem::onednn {

namespace {

struct F16 {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};

template <class T>
constexpr bool is_int = std::is_integral_v<T>;

// Source value: double for floating sources, int64 for integer ones.
template <class S>
inline auto read(const S* p, int64_t i) {
  if constexpr (std::is_same_v<S, F16>)
    return double(f16_to_f32(p[i].bits));
  else if constexpr (std::is_same_v<S, BF16>)
    return double(bf16_to_f32(p[i].bits));
  else if constexpr (is_int<S>)
    return int64_t(p[i]);
  else
    return double(p[i]);
}

template <class I>
inline I saturate(int64_t v) {
  if (v < int64_t(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v > int64_t(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return I(v);
}

inline int64_t round_to_int(double v) {  // nearest-even, saturating, NaN -> 0
  if (std::isnan(v)) return 0;
  const double r = std::nearbyint(v);
  if (r >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  if (r < -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return int64_t(r);
}

template <class D, class V>
inline void write(D* p, int64_t i, V v) {
  if constexpr (std::is_same_v<D, F16>) {
    p[i].bits = f64_to_f16(double(v));  // one rounding (s64: to f64 first)
  } else if constexpr (std::is_same_v<D, BF16>) {
    p[i].bits = f64_to_bf16(double(v));
  } else if constexpr (is_int<D>) {
    if constexpr (is_int<V>)
      p[i] = std::is_same_v<D, int64_t> ? D(v) : saturate<D>(v);
    else
      p[i] = std::is_same_v<D, int64_t> ? D(round_to_int(v)) : saturate<D>(round_to_int(v));
  } else {
    p[i] = D(double(v));  // floating target: one IEEE rounding from double (s64: f64 first)
  }
}

template <class S, class D>
void convert(const void* src, void* dst, int64_t n) {
  const S* s = static_cast<const S*>(src);
  D* d = static_cast<D*>(dst);
  if constexpr (std::is_same_v<S, float> && std::is_same_v<D, BF16>) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) d[i].bits = f32_to_bf16(s[i]);
  } else if constexpr (std::is_same_v<S, BF16> && std::is_same_v<D, float>) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i].bits);
  } else {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) write(d, i, read(s, i));
  }
}

template <class Body>
void with_type(tdm_dtype dt, Body&& body) {
  switch (dt) {
    case TDM_F32:
      return body(float{});
    case TDM_F64:
      return body(double{});
    case TDM_F16:
      return body(F16{});
    case TDM_BF16:
      return body(BF16{});
    case TDM_S8:
      return body(int8_t{});
    case TDM_U8:
      return body(uint8_t{});
    case TDM_S32:
      return body(int32_t{});
    default:
      return body(int64_t{});
  }
}

std::unique_ptr<Kernel> cast(const OpView& op, size_t&) {
  Check c(op);
  const tdm_dtype from = c.primary_dtype(0, kAll);
  const tdm_dtype to = c.primary_output_dtype(0, kAll);
  const int64_t n = numel(c.in(0).dims);
  if (from == to) {
    const size_t bytes = size_t(n) * dtype_size(from);
    return make_fn(c, [bytes](void* const* in, void* const* out, void*) {
      if (in[0] != out[0]) std::memcpy(out[0], in[0], bytes);
    });
  }
  const ConvertFn fn = converter(from, to);
  return make_fn(c, [fn, n](void* const* in, void* const* out, void*) { fn(in[0], out[0], n); });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) { r.add("cast", cast); });

}  // namespace

ConvertFn converter(tdm_dtype from, tdm_dtype to) {
  ConvertFn fn = nullptr;
  with_type(from, [&](auto s) { with_type(to, [&](auto d) { fn = &convert<decltype(s), decltype(d)>; }); });
  return fn;
}

}  // namespace tandem::onednn
