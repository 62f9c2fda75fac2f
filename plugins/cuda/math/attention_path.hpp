// CUDA backend — which attention kernels run: the tensor-core ones
// (ops/attention_mma.cu) where they compute what the catalog asks, else the
// f32-arithmetic tiles (ops/attention.cu), which take every case. Plain C++
// so the CPU tests pin the choice (tests/cuda/test_mma_layout.cpp); the
// trace names the one that ran ("attention:mma" or "attention:f32_tiles").
#ifndef TANDEM_CUDA_MATH_ATTENTION_PATH_HPP
#define TANDEM_CUDA_MATH_ATTENTION_PATH_HPP

#include <cstdint>

namespace tandem::cuda::math {

// The largest head dim the tensor-core kernels hold (their accumulators
// for a row of the head dim live in registers).
constexpr int64_t kMmaMaxHead = 128;

// Why the tensor-core kernels do not take an attention, or nullptr when
// they do: 16-bit storage (bf16, f16; the products' operands are the
// stored values, f32 would lose bits), head dims that are multiples of 16
// (one instruction's k) up to kMmaMaxHead, no dropout (the catalog's
// counter mask per element is the f32 kernels' job), and a GPU of compute
// capability 8.0 or newer (the m16n8k16 instruction).
inline const char* mma_attention_declines(bool sixteen_bit, int64_t D, int64_t E, double dropout,
                                          int compute_major) {
  if (!sixteen_bit) return "f32 data: its products keep f32 arithmetic";
  if (dropout != 0) return "dropout: the counter mask is applied per element by the f32 kernels";
  if (D % 16 != 0 || E % 16 != 0) return "head dims not multiples of 16";
  if (D > kMmaMaxHead || E > kMmaMaxHead) return "head dims above 128";
  if (compute_major < 8) return "a GPU older than compute capability 8.0 (no m16n8k16 mma)";
  return nullptr;
}

}  // namespace tandem::cuda::math

#endif  // TANDEM_CUDA_MATH_ATTENTION_PATH_HPP
