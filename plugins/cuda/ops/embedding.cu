// CUDA backend — embedding lookup and its gradient. padding_idx < 0 means
// no padding row; the padding row is looked up like any other and its
// gradient stays zero. Indices are not checked on the host (that would need
// a sync): an index outside [0, V) yields a NaN row forward and is skipped
// by the gradient; for a vocabulary slice (vocab_start >= 0) it yields a
// zero row, as the catalog says.
// The gradient sorts (row, position) pairs and sums each row's run in
// position order (ops/embedding_grad.cuh): no atomics, the naive loop's
// additions in its order, so bitwise reproducible; the sort's arrays are
// the kernel's workspace.
#include "ops/embedding_grad.cuh"

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

struct Emb {
  int64_t n, V, D, padding, start;  // start: vocab_start (-1: the whole vocabulary)
};

// padding_idx is below V (the shape rule).
Emb emb_of(const Check& c, const Dims& indices, int64_t V, int64_t D) {
  return Emb{numel(indices), V, D, c.int_attr("padding_idx"), c.int_attr("vocab_start")};
}

std::unique_ptr<Kernel> prepare_embedding(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kF32Bf16);
  const int64_t V = c.in(0).dims[0], D = c.in(0).dims[1];
  const Emb e = emb_of(c, c.in(1).dims, V, D);
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

std::unique_ptr<Kernel> prepare_embedding_grad(CudaDevice&, const OpView& v, size_t& workspace) {
  Check c(v);
  c.primary_dtype(0, kF32);
  const int64_t V = c.out(0).dims[0], D = c.out(0).dims[1];
  const Emb e = emb_of(c, c.in(1).dims, V, D);
  decline_if(c, int_positions_limit(e.n, "indices"));
  const EmbeddingGradShape shape{e.n, V, D, e.start >= 0 ? e.start : 0, e.padding};
  size_t sort_bytes = 0;
  if (V * D > 0)
    TDM_CUDA_CHECK(
        embedding_grad_sort_bytes(e.n, math::embedding_key_bits(math::embedding_sentinel(V)), sort_bytes));
  const math::EmbeddingGradLayout layout = math::embedding_grad_layout(e.n, sort_bytes);
  workspace = V * D > 0 ? layout.bytes : 0;
  return make_kernel("embedding_grad:sorted", [=](CudaStream& s, void* const* in, void* const* o, void* ws) {
    TDM_CUDA_CHECK(launch_embedding_grad(shape, static_cast<const float*>(in[0]),
                                         static_cast<const int32_t*>(in[1]), static_cast<float*>(o[0]), ws,
                                         layout, sort_bytes, s.get()));
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("embedding", prepare_embedding);
  r.add("embedding_grad", prepare_embedding_grad);
});

}  // namespace

}  // namespace tandem::cuda
