// Reference backend — element access in any dtype.
#include "common.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "tandem/half.hpp"

namespace tandem::reference {

int64_t broadcast_source(int64_t out_flat, const Dims& out, const Dims& in) {
  int64_t source = 0, in_stride = 1;
  for (size_t k = 0; k < out.size(); ++k) {  // from the last dim
    const int64_t d = out[out.size() - 1 - k];
    const int64_t coord = out_flat % d;
    out_flat /= d;
    if (k < in.size()) {
      const int64_t din = in[in.size() - 1 - k];
      if (din != 1) source += coord * in_stride;
      in_stride *= din;
    }
  }
  return source;
}

// ---------------------------------------------------------------------------
// Element access
// ---------------------------------------------------------------------------
template <class S>
static S read(const void* data, int64_t i) {
  S v;
  std::memcpy(&v, static_cast<const char*>(data) + i * int64_t(sizeof(S)), sizeof(S));
  return v;
}
template <class S>
static void write(void* data, int64_t i, S v) {
  std::memcpy(static_cast<char*>(data) + i * int64_t(sizeof(S)), &v, sizeof(S));
}

double load_double(const void* data, tdm_dtype dtype, int64_t i) {
  switch (dtype) {
    case TDM_F32:
      return read<float>(data, i);
    case TDM_F64:
      return read<double>(data, i);
    case TDM_F16:
      return f16_to_f32(read<uint16_t>(data, i));
    case TDM_BF16:
      return bf16_to_f32(read<uint16_t>(data, i));
    default:
      return static_cast<double>(load_int(data, dtype, i));
  }
}

int64_t load_int(const void* data, tdm_dtype dtype, int64_t i) {
  switch (dtype) {
    case TDM_S8:
      return read<int8_t>(data, i);
    case TDM_U8:
      return read<uint8_t>(data, i);
    case TDM_S32:
      return read<int32_t>(data, i);
    case TDM_S64:
      return read<int64_t>(data, i);
    default:
      throw Error(TDM_INTERNAL, "reference: load_int on a floating dtype");
  }
}

template <class I>
static I saturate(int64_t v) {
  if (v < int64_t(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v > int64_t(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

void store_int(void* data, tdm_dtype dtype, int64_t i, int64_t v) {
  switch (dtype) {
    case TDM_S8:
      return write<int8_t>(data, i, saturate<int8_t>(v));
    case TDM_U8:
      return write<uint8_t>(data, i, saturate<uint8_t>(v));
    case TDM_S32:
      return write<int32_t>(data, i, saturate<int32_t>(v));
    case TDM_S64:
      return write<int64_t>(data, i, v);
    default:
      return store_double(data, dtype, i, static_cast<double>(v));
  }
}

// Float -> integer: nearest, ties to even; saturating; NaN -> 0.
static int64_t round_saturate(double v, tdm_dtype dtype) {
  if (std::isnan(v)) return 0;
  double r = std::floor(v);
  const double rest = v - r;
  if (rest > 0.5 || (rest == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  const double two63 = 9223372036854775808.0;  // 2^63, exact
  if (r >= two63) return std::numeric_limits<int64_t>::max();
  if (r < -two63) return std::numeric_limits<int64_t>::min();
  (void)dtype;  // narrower dtypes saturate in store_int
  return static_cast<int64_t>(r);
}

void store_double(void* data, tdm_dtype dtype, int64_t i, double v) {
  switch (dtype) {
    case TDM_F32:
      return write<float>(data, i, static_cast<float>(v));  // IEEE: nearest-even
    case TDM_F64:
      return write<double>(data, i, v);
    case TDM_F16:
      return write<uint16_t>(data, i, f64_to_f16(v));
    case TDM_BF16:
      return write<uint16_t>(data, i, f64_to_bf16(v));
    case TDM_S8:
    case TDM_U8:
    case TDM_S32:
    case TDM_S64:
      return store_int(data, dtype, i, round_saturate(v, dtype));
    default:
      throw Error(TDM_INTERNAL, "reference: store into an invalid dtype");
  }
}

std::vector<int64_t> load_indices(const void* data, tdm_dtype dtype, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = load_int(data, dtype, i);
  return v;
}

}  // namespace tandem::reference
