#include "int8_pairs.hpp"

#include <algorithm>
#include <cstring>

namespace tandem::onednn {
namespace {

void duplicate_rows(const uint8_t* x, int64_t rows, int64_t cols, uint8_t* out) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out + 2 * r * cols, x + r * cols, size_t(cols));
    std::memcpy(out + (2 * r + 1) * cols, x + r * cols, size_t(cols));
  }
}

void split_weight_rows(const int8_t* w, int64_t rows, int64_t cols, int8_t* out) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* src = w + r * cols;
    int8_t* h = out + 2 * r * cols;
    int8_t* g = h + cols;
    for (int64_t i = 0; i < cols; ++i) {
      const int v = src[i];
      const int half = v >> 1;  // floor(v / 2): arithmetic shift, in [-64, 63]
      h[i] = int8_t(half);
      g[i] = int8_t(v - half);  // ceil(v / 2), in [-64, 64]
    }
  }
}

}  // namespace

bool pair_safe(const int8_t* w, int64_t n) {
  // (w + 64) as unsigned is > 128 exactly when w is outside [-64, 64]; an OR
  // over the whole array vectorises without early exits.
  unsigned outside = 0;
#pragma omp simd reduction(| : outside)
  for (int64_t i = 0; i < n; ++i) outside |= unsigned(uint8_t(w[i] + 64) > 128);
  return outside == 0;
}

DoubledOperands add_doubling(PrimKernel& k, int64_t x_rows, int64_t x_cols, int64_t w_rows, int64_t w_cols) {
  const DoubledOperands d{{Slot::workspace, k.reserve(size_t(x_rows * 2 * x_cols))},
                          {Slot::workspace, k.reserve(size_t(w_rows * 2 * w_cols))}};
  k.hook([=](void* const* in, void* const*, char* ws) {
    duplicate_rows(static_cast<const uint8_t*>(in[0]), x_rows, x_cols,
                   reinterpret_cast<uint8_t*>(ws + d.x.index));
    split_weight_rows(static_cast<const int8_t*>(in[1]), w_rows, w_cols,
                      reinterpret_cast<int8_t*>(ws + d.w.index));
  });
  return d;
}

PairSafeInt8Kernel::PairSafeInt8Kernel(std::unique_ptr<PrimKernel> direct,
                                       std::unique_ptr<PrimKernel> doubled, int64_t weights)
    : direct_(std::move(direct)), doubled_(std::move(doubled)), weights_(weights) {}

size_t PairSafeInt8Kernel::workspace_bytes() const {
  // One variant runs per launch: they share the workspace.
  return std::max(direct_->workspace_bytes(), doubled_->workspace_bytes());
}

void PairSafeInt8Kernel::launch(Stream& stream, void* const* in, void* const* out, void* ws) {
  if (pair_safe(static_cast<const int8_t*>(in[1]), weights_))
    direct_->launch(stream, in, out, ws);
  else
    doubled_->launch(stream, in, out, ws);
}

const char* PairSafeInt8Kernel::describe() const noexcept {
  try {
    described_ =
        std::string(direct_->describe()) + "; weights outside [-64, 64] (no VNNI): " + doubled_->describe();
    return described_.c_str();
  } catch (...) {
    return "onednn:int8 pair-safe";
  }
}

}  // namespace tandem::onednn
