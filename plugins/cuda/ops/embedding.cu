// CUDA backend — embedding lookup and its gradient (an ordered scatter-add
// after zeroing dtable). padding_idx < 0 means no padding row; the
// padding row is looked up like any other and its gradient stays zero.
// Indices are not checked on the host (that would need a sync): an index
// outside [0, V) yields a NaN row forward and is skipped by the gradient;
// for a vocabulary slice (vocab_start >= 0) it yields a zero row, as the
// catalog says.
// The gradient is deterministic: no atomics (see embedding_grad_kernel).
#include <algorithm>

#include "ops/kernels.cuh"

namespace tandem::cuda {
namespace {

// A vocabulary slice (start >= 0) reads zeros outside its rows; a whole
// table marks a bad index with NaN.
template <class T>
__global__ void embedding_kernel(const T* table, const int32_t* idx, T* y, int64_t n, int64_t V, int64_t D,
                                 int64_t start) {
  TDM_GRID_STRIDE(i, n * D) {
    const int64_t row = idx[i / D] - (start >= 0 ? start : 0), j = i % D;
    st(y, i, row >= 0 && row < V ? ld(table, row * D + j) : (start >= 0 ? 0.f : NAN));
  }
}

// Deterministic scatter-add: thread (j, bucket) owns dtable[v, j] for every
// row v with v % buckets == bucket and adds dy[i, j] over positions i in
// order, so results are bitwise reproducible (no atomics) and summed in the
// reference's order. All threads of a warp read the same index (one load).
__global__ void embedding_grad_kernel(const float* dy, const int32_t* idx, float* dtable, int64_t n,
                                      int64_t V, int64_t D, int64_t padding, int64_t buckets, int64_t shift) {
  TDM_GRID_STRIDE(t, D * buckets) {
    const int64_t j = t % D, bucket = t / D;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = idx[i] - shift;
      if (row < 0 || row >= V || row == padding || row % buckets != bucket) continue;
      dtable[row * D + j] += dy[i * D + j];
    }
  }
}

struct Emb {
  int64_t n, V, D, padding, start;  // start: vocab_start (-1: the whole vocabulary)
};

Emb emb_of(const Check& c, const Dims& indices, int64_t V, int64_t D) {
  if (c.in(1).dtype != TDM_S32) c.fail("indices must be s32");
  const int64_t padding = c.op().int_attr("padding_idx", -1);
  if (padding >= V)
    c.fail("padding_idx " + std::to_string(padding) + " is not below V = " + std::to_string(V));
  return Emb{numel(indices), V, D, padding, c.op().int_attr("vocab_start", -1)};
}

std::unique_ptr<Kernel> prepare_embedding(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(2, 2, 1, 1);
  const tdm_dtype t = c.primary_dtype(0, kF32Bf16);
  if (c.in(0).rank() != 2) c.fail("table must be [V, D]");
  const int64_t V = c.in(0).dims[0], D = c.in(0).dims[1];
  const Emb e = emb_of(c, c.in(1).dims, V, D);
  Dims y = c.in(1).dims;
  y.push_back(D);
  c.output(0, t, y);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel("embedding", [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (e.n * e.D == 0) return;
      embedding_kernel<T><<<grid_for(e.n * e.D), kThreads, 0, s.get()>>>(
          static_cast<const T*>(in[0]), static_cast<const int32_t*>(in[1]), static_cast<T*>(o[0]), e.n, e.V,
          e.D, e.start);
    });
  });
  return k;
}

std::unique_ptr<Kernel> prepare_embedding_grad(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(2, 2, 1, 1);
  c.primary_dtype(0, kF32);
  if (c.out(0).rank() != 2) c.fail("dtable must be [V, D]");
  const int64_t V = c.out(0).dims[0], D = c.out(0).dims[1];
  const Emb e = emb_of(c, c.in(1).dims, V, D);
  Dims dy = c.in(1).dims;
  dy.push_back(D);
  c.input(0, TDM_F32, dy);
  c.output(0, TDM_F32, {V, D});
  return make_kernel("embedding_grad:ordered", [=](CudaStream& s, void* const* in, void* const* o, void*) {
    TDM_CUDA_CHECK(cudaMemsetAsync(o[0], 0, static_cast<size_t>(e.V * e.D) * sizeof(float), s.get()));
    if (e.n * e.D == 0) return;
    // Enough (column, bucket) threads to fill the GPU, at most one per row.
    const int64_t buckets =
        std::max<int64_t>(1, std::min<int64_t>(e.V, (int64_t(1) << 16) / std::max<int64_t>(1, e.D)));
    embedding_grad_kernel<<<grid_for(e.D * buckets), kThreads, 0, s.get()>>>(
        static_cast<const float*>(in[0]), static_cast<const int32_t*>(in[1]), static_cast<float*>(o[0]), e.n,
        e.V, e.D, e.padding, buckets, e.start >= 0 ? e.start : 0);
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("embedding", prepare_embedding);
  r.add("embedding_grad", prepare_embedding_grad);
});

}  // namespace

}  // namespace tandem::cuda
