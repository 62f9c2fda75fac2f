// oneDNN backend — exact INT8 on CPUs whose u8·s8 pair sums saturate.
//
// Without VNNI (AVX2, AVX-512 before Cascade Lake: cpu_isa.hpp) oneDNN's
// u8 x s8 kernels multiply with vpmaddubsw, which adds the two products of
// each adjacent pair in a saturating signed 16-bit lane: x0·w0 + x1·w1
// clips at ±32767 whenever it exceeds it (255·127·2 = 64770 can). The
// catalog promises an exact s32 sum, so such a kernel would silently return
// wrong numbers. With every |w| <= 64 a pair stays within 2·255·64 = 32640:
// exact.
//
// So on such a CPU linear_int8 and conv2d_int8 prepare two variants:
//   direct  — the op as it is: exact when every weight lies in [-64, 64],
//             which is what `tandem quantize` writes for such a CPU (7-bit
//             weights, recorded in calibration.json);
//   doubled — the reduction twice as long: x' = [x | x] and
//             w' = [h | g] with h = floor(w / 2) and g = w − h, both in
//             [-64, 64], so Σ x'·w' = Σ x·(h + g) = Σ x·w exactly, for any
//             weights, and oneDNN's own epilogue (output scales, zero point,
//             bias, relu) applies unchanged. Twice the arithmetic.
// Each launch checks the weights (one pass over N·K bytes) and runs the
// direct variant when they fit. On a CPU with VNNI only the direct variant
// exists.
#ifndef TANDEM_ONEDNN_OPS_INT8_PAIRS_HPP
#define TANDEM_ONEDNN_OPS_INT8_PAIRS_HPP

#include "common.hpp"

namespace tandem::onednn {

// Where the doubled variant finds x' and w' (workspace slots of its kernel).
struct DoubledOperands {
  Slot x, w;
};

// Reserves x' (x_rows x 2·x_cols u8) and w' (w_rows x 2·w_cols s8) in `k`'s
// workspace and appends the step that fills them from inputs 0 (x) and
// 1 (w) at every launch: each row of x twice, each row of w as [h | g].
// Rows are what the reduction runs along: [B | K] for linear, and for a
// convolution with G groups N·G rows of C/G·H·W (x) and K rows of C/G·R·S (w).
DoubledOperands add_doubling(PrimKernel& k, int64_t x_rows, int64_t x_cols, int64_t w_rows, int64_t w_cols);

// The kernel choosing between the two variants at each launch.
class PairSafeInt8Kernel final : public Kernel {
 public:
  // `weights` is the number of s8 elements of input 1.
  PairSafeInt8Kernel(std::unique_ptr<PrimKernel> direct, std::unique_ptr<PrimKernel> doubled,
                     int64_t weights);
  size_t workspace_bytes() const;
  void launch(Stream& stream, void* const* in, void* const* out, void* ws) override;
  const char* describe() const noexcept override;

 private:
  std::unique_ptr<PrimKernel> direct_, doubled_;
  int64_t weights_;
  mutable std::string described_;
};

// Whether every one of the n weights lies within [-64, 64].
bool pair_safe(const int8_t* w, int64_t n);

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_OPS_INT8_PAIRS_HPP
