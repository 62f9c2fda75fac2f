// CUDA backend — where the elements of a warp-level matrix product sit:
// the m16n8k16 tensor-core instruction (mma.sync, sm_80 and newer, 16-bit
// A and B, f32 accumulators) spreads its operands over the 32 lanes of a
// warp in fixed places. ops/attention_mma.cu loads its fragments from
// shared memory and turns score accumulators into the next product's A
// operand through these functions, and the CPU tests replay a warp's
// products through them (tests/cuda/test_mma_layout.cpp), so a wrong index
// shows on a machine without a GPU.
//
// Lane l is in group g = l / 4 (a row of 8 lanes' worth) and position
// q = l % 4 in it. Each 32-bit register holds two 16-bit elements, the
// lower-numbered column (A, C) or row (B) in the low half.
//   A 16 x 16 (row-major): reg 0 (g, 2q), reg 1 (g + 8, 2q), reg 2 (g, 2q + 8), reg 3 (g + 8, 2q + 8)
//   B 16 x 8 (k x n):      reg 0 (2q, g),  reg 1 (2q + 8, g)  (k, n), the pair runs along k
//   C 16 x 8 (f32):        c0 (g, 2q), c1 (g, 2q + 1), c2 (g + 8, 2q), c3 (g + 8, 2q + 1)
#ifndef TANDEM_CUDA_MATH_MMA_LAYOUT_HPP
#define TANDEM_CUDA_MATH_MMA_LAYOUT_HPP

#include "math/common.hpp"

namespace tandem::cuda::math::mma {

struct Place {
  int row, col;
};

// The first of the two elements of A register `reg` (0-3) of `lane`; the
// second is one column right.
TDM_HD constexpr Place a_place(int lane, int reg) {
  return {lane / 4 + 8 * (reg & 1), 2 * (lane % 4) + 8 * (reg >> 1)};
}

// The first (k, n) of the two elements of B register `reg` (0-1); the
// second is one k further.
TDM_HD constexpr Place b_place(int lane, int reg) {
  return {2 * (lane % 4) + 8 * reg, lane / 4};
}

// The place of accumulator `i` (0-3) of `lane`.
TDM_HD constexpr Place c_place(int lane, int i) {
  return {lane / 4 + 8 * (i >> 1), 2 * (lane % 4) + (i & 1)};
}

// A register of A for the k-columns [16·j, 16·j + 16) made from the f32
// accumulators of the two 8-column products 2j and 2j + 1 that the same
// lane holds: register r takes accumulators (2·(r & 1), 2·(r & 1) + 1) of
// product 2j + (r >> 1). The places agree, so a product's result becomes
// the next product's A without leaving the registers.
TDM_HD constexpr int c_tile_of_a_reg(int reg) {
  return reg >> 1;
}
TDM_HD constexpr int c_first_of_a_reg(int reg) {
  return 2 * (reg & 1);
}

}  // namespace tandem::cuda::math::mma

#endif  // TANDEM_CUDA_MATH_MMA_LAYOUT_HPP
