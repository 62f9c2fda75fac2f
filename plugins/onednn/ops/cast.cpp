// oneDNN backend — cast (every dtype pair) and fill: own code.
//
// Each (src, dst) pair is its own template instance, so the inner loop has no
// switch. f32 <-> bf16 use the bit-level round-to-nearest-even; anything with
// f16 or f64 goes through double, which holds every source value exactly, so
// each result is rounded once as the catalog requires (s64 -> floating is
// rounded to f64 first, as the catalog says).
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

// Rounds a double to a 16-bit float format (exponent bits e, mantissa bits m),
// nearest-even; NaN stays quiet with its sign, overflow gives infinity.
uint16_t encode_half(double value, int e_bits, int m_bits) {
  const uint16_t sign = std::signbit(value) ? uint16_t(0x8000) : uint16_t(0);
  const uint16_t inf = uint16_t(((1u << e_bits) - 1u) << m_bits);
  if (std::isnan(value)) return uint16_t(sign | inf | (1u << (m_bits - 1)));
  const double a = std::fabs(value);
  if (std::isinf(a)) return uint16_t(sign | inf);
  if (a == 0.0) return sign;
  const int bias = (1 << (e_bits - 1)) - 1, emin = 1 - bias;
  int e = 0;
  std::frexp(a, &e);
  int exponent = e - 1 > emin ? e - 1 : emin;
  const double rounded = std::nearbyint(std::ldexp(a, m_bits - exponent));  // nearest-even
  uint64_t sig = uint64_t(rounded);
  const uint64_t one = uint64_t(1) << m_bits;
  if (sig >= 2 * one) sig >>= 1, ++exponent;
  if (exponent > bias) return uint16_t(sign | inf);
  if (sig < one) return uint16_t(sign | sig);
  return uint16_t(sign | (uint64_t(exponent + bias) << m_bits) | (sig - one));
}

double decode_half(uint16_t bits, int e_bits, int m_bits) {
  const uint32_t emask = (1u << e_bits) - 1u, biased = (bits >> m_bits) & emask;
  const uint32_t mant = bits & ((1u << m_bits) - 1u);
  const int bias = (1 << (e_bits - 1)) - 1;
  double mag;
  if (biased == emask)
    mag = mant ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  else if (biased == 0)
    mag = std::ldexp(double(mant), 1 - bias - m_bits);
  else
    mag = std::ldexp(double(mant + (1u << m_bits)), int(biased) - bias - m_bits);
  return (bits >> 15) ? -mag : mag;
}

template <class T>
constexpr bool is_int = std::is_integral_v<T>;

// Source value: double for floating sources, int64 for integer ones.
template <class S>
inline auto read(const S* p, int64_t i) {
  if constexpr (std::is_same_v<S, F16>)
    return decode_half(p[i].bits, 5, 10);
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
  if constexpr (std::is_same_v<D, F16>)
    p[i].bits = encode_half(double(v), 5, 10);
  else if constexpr (std::is_same_v<D, BF16>) {
    if constexpr (std::is_same_v<V, double>)
      p[i].bits = encode_half(v, 8, 7);
    else
      p[i].bits = encode_half(double(v), 8, 7);
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

using ConvertFn = void (*)(const void*, void*, int64_t);

ConvertFn converter(tdm_dtype from, tdm_dtype to) {
  ConvertFn fn = nullptr;
  with_type(from, [&](auto s) { with_type(to, [&](auto d) { fn = &convert<decltype(s), decltype(d)>; }); });
  return fn;
}

std::unique_ptr<Kernel> cast(const OpView& op, size_t&) {
  Check c(op);
  c.counts(1, 1, 1, 1);
  const tdm_dtype from = c.primary_dtype(0, kAll);
  const tdm_dtype to = c.primary_output_dtype(0, kAll);
  c.output(0, to, c.in(0).dims);
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

std::unique_ptr<Kernel> fill(const OpView& op, size_t&) {
  Check c(op);
  c.counts(0, 1, 1, 1);
  const tdm_dtype dt = c.primary_output_dtype(0, kAll);
  if (c.has_input(0)) c.input(0, dt, c.out(0).dims);  // `like`: only names the memory (in place)
  const double value = c.float_attr("value", 0.0);
  uint64_t pattern = 0;  // the value's bytes in dt, computed once here
  converter(TDM_F64, dt)(&value, &pattern, 1);
  const size_t width = dtype_size(dt);
  const int64_t n = numel(c.out(0).dims);
  return make_fn(c, [pattern, width, n](void* const*, void* const* out, void*) {
    char* o = static_cast<char*>(out[0]);
    auto run = [&](auto t) {
      using W = decltype(t);
      W v;
      std::memcpy(&v, &pattern, sizeof(W));
      W* p = reinterpret_cast<W*>(o);
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) p[i] = v;
    };
    if (width == 1) run(uint8_t{});
    if (width == 2) run(uint16_t{});
    if (width == 4) run(uint32_t{});
    if (width == 8) run(uint64_t{});
  });
}

}  // namespace

void register_cast(const Registrar& add) {
  add("cast", cast);
  add("fill", fill);
}

}  // namespace tandem::onednn
