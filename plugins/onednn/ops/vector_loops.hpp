// oneDNN backend — the own element-wise loops of transformer training whose
// time is arithmetic rather than memory traffic: exp, the attention's
// softmax rows, gelu (tanh form), a layer norm's rows; and the optimizers'
// updates, memory bound but still faster wide (see sgd below). Like
// the attention tiles they are compiled once per vector level
// (vector_loops.cpp: the baseline copy and the choice; vector_loops_avx2.cpp,
// vector_loops_avx512.cpp) and picked by oneDNN's effective ISA, so
// ONEDNN_MAX_CPU_ISA caps them too.
//
// Why: as baseline x86-64 code (4-wide SSE2, no FMA, floor by a library
// call) these loops took 68 ms of an 814 ms GPT step on 1 thread on a Zen 3
// (gelu 16, gelu_grad 22, layer_norm 7, layer_norm_grad 13, adamw_update 10;
// `tandem bench bench/models/gpt.toml --threads 1 --profile`).
//
// Each call is one thread's work; the ops thread over rows or chunks.
#ifndef TANDEM_ONEDNN_OPS_VECTOR_LOOPS_HPP
#define TANDEM_ONEDNN_OPS_VECTOR_LOOPS_HPP

#include <cstdint>

namespace tandem::onednn::loops {

// y[i] = exp(x[i]) for n elements, ~1 ulp (Cephes' polynomial after a
// two-part ln 2 reduction); exp of anything below -87.3 (and of -inf) is 0.
void exp_inplace(float* x, int64_t n);

// The softmax rows of the fused attention (attention.cpp), a tile of `rows`
// rows of `cols` scores a call, where row i may see its first
// clamp(i + seen0, 0, cols) (a causal tile's triangle; seen0 >= cols: all)
// and the rest are set to 0. One call a tile: as baseline code in
// attention.cpp the row maximum was a scalar chain of maxss, and the rows
// two calls each with baseline code between them.
// Forward (online softmax): the seen scores s become exp(s − m) for the
// row's new running maximum m[i] (a NaN in the row is passed over as by
// std::max), and l[i] and the row's e accumulators in acc are rescaled to it
// (l[i] then adds the row's f32 sum); a row whose maximum stays −inf is
// zeroed and keeps m, l and acc.
// Gradient, from the saved log-sum-exp lse and Δ = delta: p = exp(p − lse)
// (the scores in, probabilities out) and dp = p·(dp − delta), which is ds,
// on the seen part; zeros (p and ds) past it and on rows with lse = −inf.
void online_softmax_rows(float* sc, int64_t rows, int64_t cols, int64_t seen0, float* m, float* l, float* acc,
                         int64_t e);
void softmax_grad_rows(float* p, float* dp, int64_t rows, int64_t cols, int64_t seen0, const float* lse,
                       const float* delta);
// d[j] = 1/(1 − p) where the catalog's dropout mask drawn with `seed` keeps
// element first + j (sdk/include/tandem/dropout_mask.hpp), else 0, for
// j < n: the attention's dropout factors of one row of scores, whose mask
// elements are consecutive. Called an element at a time through the SDK's
// function, the mask took the GPT benchmark's attention with dropout 0.1 to
// 76-82 ms a step on 1 thread (26 without dropout); a call a row, 43-47.
// p is compared as given (u ≥ p, as the catalog's ops do with their double
// p); the factor is f32's 1/(1 − p). The dropout op takes only the mask
// from it (d[j] ≠ 0), its values being x/(1 − p).
void dropout_factors(uint64_t seed, uint64_t first, double p, int64_t n, float* d);
// out[r] = Σ_i a[r·lda + i]·b[r·ldb + i] for r < rows, each in f32 in the
// vector level's lane order: the attention gradient's Δ = rowsum(do·o) of a
// tile, one call a tile (a scalar chain of adds in attention.cpp's baseline code).
void row_dots(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t rows, int64_t n, float* out);
// dst[r·ldd + c] = src[r·lds + c]·mul for r < rows, c < cols: the attention's
// f32 tiles into and out of their strided rows, which as baseline (4-wide)
// code took 10 % of the GPT's attention samples under perf; this way and
// with row_dots, its forward and gradient took 1-2 % less time.
void scale_rows(const float* src, int64_t lds, int64_t rows, int64_t cols, float mul, float* dst,
                int64_t ldd);

// y = gelu_tanh(x) = x·σ(2u), u = √(2/π)·(x + 0.044715·x³); in place allowed.
void gelu_tanh(const float* x, float* y, int64_t n);

// dx = dy · d gelu_tanh(x)/dx; in place (dx = dy or x) allowed.
void gelu_tanh_grad(const float* dy, const float* x, float* dx, int64_t n);

// One row of d features: y = (x − mean)·rstd·gamma + beta, the statistics
// summed in double; stores the row's mean and rstd.
void layer_norm_row(const float* x, const float* gamma, const float* beta, float* y, int64_t d, float eps,
                    float* mean, float* rstd);

// One row's input gradient from the saved statistics:
// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) (+ addend, when not null; it may
// be dx itself) with g = dy·gamma, x̂ = (x − mean)·rstd.
void layer_norm_grad_row(const float* dy, const float* x, const float* gamma, float mean, float rstd,
                         const float* addend, float* dx, int64_t d);

// One row's terms of the parameter gradients: dgamma += dy·x̂, dbeta += dy.
void layer_norm_param_sums(const float* dy, const float* x, float mean, float rstd, float* dgamma,
                           float* dbeta, int64_t d);

// Elements per task of the optimizers' updates, threaded over such chunks:
// a multiple of every vector width, and few tasks for the small tensors
// (biases, norms' gains).
constexpr int64_t kUpdateChunk = 16384;

// AdamW's coefficients for one step: moments m = b1·m + (1 − b1)·g and
// v = b2·v + (1 − b2)·g², param = param·decay − lr·(m/bc1)/(√(v/bc2) + eps).
struct AdamW {
  float b1, b2, one_minus_b1, one_minus_b2, bc1, bc2, lr, eps, decay;
};
// n elements; outputs may be the inputs (each element is read before it is written).
void adamw(const AdamW& h, const float* param, const float* grad, const float* m, const float* v,
           float* param_out, float* m_out, float* v_out, int64_t n);

// SGD's coefficients for one step, PyTorch's algorithm: g = grad + wd·param;
// with momentum b = momentum·buf + damp·g and param −= lr·(nesterov ? g +
// momentum·b : b), else param −= lr·g.
struct Sgd {
  float lr, wd, momentum, damp;
  bool nesterov;
};
// n elements; buf and buf_out null without momentum; outputs may be the
// inputs (each element is read before it is written). Memory bound, but as
// baseline code (4-wide, no FMA) the gemm_mlp benchmark's update took 20-30 %
// longer than compiled for AVX-512 on a Sapphire Rapids class Xeon: 4.4-4.7
// against 3.6-3.7 ms a step on 1 thread, 2.4-2.8 against 2.0-2.1 on 2
// (`tandem bench bench/models/gemm_mlp.toml --profile`, 3 alternating pairs).
void sgd(const Sgd& h, const float* param, const float* grad, const float* buf, float* param_out,
         float* buf_out, int64_t n);

}  // namespace tandem::onednn::loops

#endif  // TANDEM_ONEDNN_OPS_VECTOR_LOOPS_HPP
