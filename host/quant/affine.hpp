// Affine INT8 parameters (sdk/ops.md "quantize"): from a real range to a
// u8 scale and zero point, and symmetric s8 weights per tensor or per output
// channel. The rounding here is the catalog's (f32 division, round half to
// even, saturation), so a weight quantized on the host is bit-identical to
// what a backend's `quantize` op would give.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tandem::host::quant {

struct Range {
  double lo = 0;
  double hi = 0;
};

struct AffineU8 {
  double scale = 1;
  int64_t zero_point = 0;
};

// The u8 grid covering [min(lo, 0), max(hi, 0)]: 0.0 is always exactly
// representable (zero padding and ReLU zeros stay exact). An empty range
// gives scale 1, zero point 0.
AffineU8 u8_params(Range r);

struct QuantizedWeights {
  std::vector<int8_t> values;  // [N, K], in [-qmax, qmax]
  std::vector<float> scales;   // N entries (per channel) or 1 (per tensor)
};

// The largest weight magnitude: 127 (8 bits) everywhere INT8 sums are exact
// for any weights, 63 (7 bits) for CPUs that add u8·s8 products pairwise in
// saturating 16-bit lanes (x86 without VNNI), where |w| <= 64 keeps every
// pair exact and the backend's direct kernel applies (see weight_range.hpp).
inline constexpr int kWeightQmax8 = 127;
inline constexpr int kWeightQmax7 = 63;

// Symmetric s8 quantization of w [N, K]: scale = max|w| / qmax per row (or
// over the whole tensor); -128 is never used, so negation stays exact.
QuantizedWeights quantize_weights(std::span<const float> w, int64_t rows, int64_t cols, bool per_channel,
                                  int qmax = kWeightQmax8);

}  // namespace tandem::host::quant
