// oneDNN backend — an own packed f32 matrix product for CPUs whose widest
// vector unit oneDNN may use is AVX2 + FMA.
//
// Why: oneDNN 2.6's AVX2 sgemm ("gemm:jit") is slow on the products of a
// 1024-wide MLP at batch 256 (M = 256, N = K = 1024 and M = N = 1024,
// K = 256: 4 KiB rows in every operand). `tandem bench
// bench/models/gemm_mlp.toml --profile`, fastest of 4-5 processes each, on
// a Zen 3 (AVX2): linear / linear_grad_input / linear_grad_weight per step
// 29.6 / 26.9 / 25.4 ms on oneDNN, 27.3 / 20.5 / 25.1 ms here on 1 thread;
// 14.7 / 13.6 / 13.7 against 13.4 / 10.3 / 12.6 ms on 2 threads. The
// products of bench/models/gpt.toml run as fast as on oneDNN (534 against
// 535 ms a step on 1 thread). A BLIS-style GEMM: A and B packed into
// micro-panels, a 6 x 16 register block, 256-deep k blocks. On AVX-512 CPUs
// oneDNN's brgemm kernels keep the products.
//
// Every element of C is one thread's, summed over k in increasing order
// starting from 0 (k blocks continue from what the previous block stored),
// so the result is the same bits for any thread count. A weight gradient
// at least 2048 deep, of at most 2^21 outputs, is summed as two halves of
// the depth, each that way, then added (sgemm.cpp: halves_depth); whether
// it is depends on the shape alone.
#ifndef TANDEM_ONEDNN_OPS_SGEMM_HPP
#define TANDEM_ONEDNN_OPS_SGEMM_HPP

#include <cstddef>
#include <cstdint>

namespace tandem::onednn::sgemm {

// c[m x n] = op(a)·op(b) (+ bias[j]) (then relu), all f32, dense row-major.
struct Problem {
  int64_t m = 0, n = 0, k = 0;
  bool a_transposed = false;  // a stored [k, m] (else [m, k])
  bool b_transposed = false;  // b stored [n, k] (else [k, n])
  bool bias = false;
  bool relu = false;
  // Also the sums over the depth of op(a)'s rows, row_sums[i] = Σ_q a(i, q),
  // f32 in increasing q from 0 (per half, when the depth is halved): a
  // weight gradient's dbias (dy's columns).
  // Only with a_transposed, where packing reads a row of every step.
  bool row_sums = false;
  // c += op(a)·op(b): the first k block continues from what c holds (an
  // addend the caller put there) instead of from 0.
  bool accumulate = false;
};

// Register block and cache blocks: a 6 x 16 block of c is 12 AVX2
// accumulators (two FMA ports x 4 cycles latency need 8 or more); a B
// micro-panel of kKc x 16 floats (16 KiB) stays in L1, an A block of
// kMc x kKc (72 KiB) in L2, a B block of kKc x kNc in L3.
constexpr int64_t kMr = 6, kNr = 16, kKc = 256, kMc = 72, kNc = 4080;

// How the m x n output is cut among threads: tm row groups x tn column
// groups (tm·tn threads; 1 x 1 for problems too small to share).
struct Split {
  int tm = 1, tn = 1;
};
Split split_for(int64_t m, int64_t n, int64_t k, int threads);

// Whether this product runs here rather than on oneDNN: the CPU's (or the
// ONEDNN_MAX_CPU_ISA limit's) widest level is AVX2 + FMA, no dimension is
// below the register block's, it has at least 2^25 multiply-adds (the
// Fashion-MNIST MLP's, at most 26 M, ran no faster here), and TANDEM_ONEDNN_OWN_SGEMM is not "0" ("all" drops
// the size rule, for tests).
bool serves(const Problem& p);

// The packing buffers of `threads` threads.
size_t workspace_bytes(const Problem& p, int threads);

// Runs the product with `threads` threads (the count workspace_bytes was
// asked for); bias may be null when !p.bias, row_sums (m floats) when
// !p.row_sums.
void run(const Problem& p, const float* a, const float* b, const float* bias, float* c, float* row_sums,
         void* workspace, int threads);

// The part one thread computes, rows [m0, m1) x columns [n0, n1), with its
// packing buffers pa (kMc·kKc + 8 floats) and pb (kKc·columns, at most
// kKc·kNc): the AVX2 + FMA code (sgemm_avx2.cpp). row_sums[m0, m1) are
// written when non-null (one part per row range passes them).
namespace avx2 {
void rectangle(const Problem& p, const float* a, const float* b, const float* bias, float* c, float* row_sums,
               int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* pa, float* pb);
}

}  // namespace tandem::onednn::sgemm

#endif  // TANDEM_ONEDNN_OPS_SGEMM_HPP
