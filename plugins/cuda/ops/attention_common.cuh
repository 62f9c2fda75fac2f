// CUDA backend — what the two attention implementations share: the op's
// sizes and attributes as the kernels read them (Attn), the pointers of one
// launch (AttnIo), and the per-element mask rule. ops/attention.cu holds
// the f32-arithmetic kernels (every dtype, dropout) and the prepare
// functions that pick one; ops/attention_mma.cu the tensor-core kernels.
#ifndef TANDEM_CUDA_OPS_ATTENTION_COMMON_CUH
#define TANDEM_CUDA_OPS_ATTENTION_COMMON_CUH

#include <cuda_runtime.h>

#include <cstdint>

#include "math/attention.hpp"
#include "ops/kernels.cuh"
#include "tandem/attention_operands.hpp"

namespace tandem::cuda {

struct Attn {
  int64_t B = 0, H = 0, G = 0, T = 0, S = 0;
  int D = 0, E = 0;
  bool causal = false;
  AttentionLayout layout;
  float scale = 0.0f, dropout = 0.0f, inv_keep = 1.0f;
  uint64_t seed = 0;

  __host__ __device__ int64_t group() const { return H / G; }
  // Where the rows of q (and dq), o (do) of query head h, and of k (dk), v
  // (dv) of kv head g start (position t or s), and their strides.
  __host__ __device__ int64_t q_row(int64_t b, int64_t h, int64_t t = 0) const {
    return layout.row(b, h, t, H, T, D);
  }
  __host__ __device__ int64_t o_row(int64_t b, int64_t h, int64_t t = 0) const {
    return layout.row(b, h, t, H, T, E);
  }
  __host__ __device__ int64_t k_row(int64_t b, int64_t g, int64_t s = 0) const {
    return layout.row(b, g, s, G, S, D);
  }
  __host__ __device__ int64_t v_row(int64_t b, int64_t g, int64_t s = 0) const {
    return layout.row(b, g, s, G, S, E);
  }
  __host__ __device__ int64_t ldq() const { return layout.stride(H, D); }
  __host__ __device__ int64_t ldo() const { return layout.stride(H, E); }
  __host__ __device__ int64_t ldk() const { return layout.stride(G, D); }
  __host__ __device__ int64_t ldv() const { return layout.stride(G, E); }
  // A q-like tensor's dims in the layout (host side, for the checks).
  Dims shape(int64_t heads, int64_t n, int64_t w) const { return layout.dims(B, heads, n, w); }
  // One past the last key that a query before t_end may see.
  __host__ __device__ int64_t key_end(int64_t t_end) const {
    if (!causal) return S;
    const int64_t e = t_end + S - T;
    return e < 0 ? 0 : (e > S ? S : e);
  }
  // The first query that may see key s.
  __host__ __device__ int64_t query_begin(int64_t s) const {
    if (!causal) return 0;
    const int64_t t = s - (S - T);
    return t < 0 ? 0 : (t > T ? T : t);
  }
};

// Every pointer one launch uses (the forward leaves the gradient's null).
template <class T>
struct AttnIo {
  const T *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *dout = nullptr;
  const uint8_t* mask = nullptr;
  const int64_t* seed_offset = nullptr;
  const float* lse = nullptr;
  float* delta = nullptr;  // Δ, the gradient's workspace
  T *out = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
  float* lse_out = nullptr;
};

__device__ __forceinline__ uint64_t seed_of(const Attn& a, const int64_t* offset) {
  return a.seed + (offset != nullptr ? static_cast<uint64_t>(*offset) : 0);
}

// Whether query t may see key s of batch b; `in_tile` guards the mask read.
__device__ __forceinline__ bool allowed(const Attn& a, const uint8_t* mask, int64_t b, int64_t t, int64_t s,
                                        bool in_tile) {
  if (!in_tile) return false;
  const bool padded = mask != nullptr && mask[b * a.S + s] != 0;
  return math::attention_allowed(padded, a.causal, t, s, a.T, a.S);
}

// The tensor-core kernels (ops/attention_mma.cu), for bf16 and f16 storage
// when math::mma_attention_declines says they apply: the forward writes o
// and lse; the gradient's two kernels write dq, and dk and dv, from Δ
// (io.delta) computed before them.
template <class T>
void launch_mma_attention(const Attn& a, const AttnIo<T>& io, cudaStream_t stream);
template <class T>
void launch_mma_attention_grad(const Attn& a, const AttnIo<T>& io, cudaStream_t stream);
// The dynamic shared memory the tensor-core kernels take at head dims D, E,
// and makes them allowed it (once per device: the same value every time).
size_t mma_attention_smem(int D, int E);
void allow_mma_attention_smem(int limit);

}  // namespace tandem::cuda

#endif  // TANDEM_CUDA_OPS_ATTENTION_COMMON_CUH
