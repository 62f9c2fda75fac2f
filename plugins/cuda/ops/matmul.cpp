// CUDA backend — matmul on cuBLAS (ops/gemm.hpp): one strided-batched call
// when each side's batch is all or nothing, else one GEMM per batch with the
// offsets resolved here, in prepare.
#include "ops/gemm.hpp"

namespace tandem::cuda {
namespace {

std::unique_ptr<Kernel> prepare_matmul(CudaDevice& d, const OpView& v, size_t& workspace) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  // The registry has checked the dtypes, the ranks, K and that y's batch
  // dims are a's and b's broadcast.
  const Dims &a = c.in(0).dims, &b = c.in(1).dims, &y = c.out(0).dims;
  const bool ta = v.int_attr("transpose_a", 0) != 0, tb = v.int_attr("transpose_b", 0) != 0;
  const int64_t M = ta ? a[a.size() - 1] : a[a.size() - 2], K = ta ? a[a.size() - 2] : a[a.size() - 1];
  const int64_t N = tb ? b[b.size() - 2] : b[b.size() - 1];
  const Dims ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2), batch(y.begin(), y.end() - 2);
  const int64_t nb = numel(batch);
  Gemm g = make_gemm(d, t, ta, tb, M, N, K);
  workspace = g.workspace_bytes;
  g.batch = nb;
  decline_if(c, gemm_limit(M, N, K, nb));
  const bool a_all = numel(ba) == nb && Dims(batch.end() - ba.size(), batch.end()) == ba;
  const bool b_all = numel(bb) == nb && Dims(batch.end() - bb.size(), batch.end()) == bb;
  if ((a_all || numel(ba) == 1) && (b_all || numel(bb) == 1)) {
    g.stride_a = numel(ba) == 1 ? 0 : M * K;
    g.stride_b = numel(bb) == 1 ? 0 : K * N;
  } else {
    // Offsets of each output batch in a and b (broadcast dims contribute 0).
    for (int64_t i = 0; i < nb; ++i) {
      int64_t rest = i, oa = 0, ob = 0, sa = M * K, sb = K * N;
      for (size_t k = batch.size(); k-- > 0;) {
        const int64_t coord = rest % batch[k];
        rest /= batch[k];
        const size_t shift = batch.size() - k;  // position from the right
        if (shift <= ba.size()) {
          const int64_t dim = ba[ba.size() - shift];
          if (dim != 1) oa += coord * sa;
          sa *= dim;
        }
        if (shift <= bb.size()) {
          const int64_t dim = bb[bb.size() - shift];
          if (dim != 1) ob += coord * sb;
          sb *= dim;
        }
      }
      g.offsets.emplace_back(oa, ob);
    }
  }
  return make_kernel(
      "matmul:cublasGemmStridedBatchedEx",
      [g](CudaStream& s, void* const* in, void* const* o, void* ws) { g.run(s, in[0], in[1], o[0], ws); });
}

[[maybe_unused]] const bool registered =
    sections().enlist([](Registry& r) { r.add("matmul", prepare_matmul); });

}  // namespace

}  // namespace tandem::cuda
