// oneDNN backend — matrix-product kernels (matmul_primitive.hpp).
#include "matmul_primitive.hpp"

#include <omp.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "dnnl_api.hpp"

namespace tandem::onednn {

using dnnl::memory;

memory::desc view_md(const Dims& batch, int64_t rows, int64_t cols, bool transposed, tdm_dtype dt) {
  Dims physical = batch;
  physical.push_back(transposed ? cols : rows);
  physical.push_back(transposed ? rows : cols);
  Dims strides = strides_of(physical);
  Dims dims = batch;
  dims.push_back(rows);
  dims.push_back(cols);
  if (transposed) std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  return memory::desc(to_dnnl(dims), dnnl_type(dt), to_dnnl(strides));
}

namespace {

// Whether to run y = a·b on a transposed copy of b. oneDNN 2.6's AVX2 sgemm
// (impl "gemm:jit"; AVX-512 machines get brgemm, which does not have this
// problem) reads a b stored as is ([K, N] row-major) at 60 % of the speed of
// a b stored transposed when b's rows are a multiple of 4 KiB and a has 64 to
// 256 rows: measured on 2 threads, M = 256, K = N = 1024 (every hidden
// layer's dx = dy·w of bench/models/gemm_mlp.toml), 153 GFLOP/s against 229
// for a reorder into the transposed form plus the matmul on it; on 1 thread 78
// against 115 (dnnl::matmul timed alone). In the benchmark (`tandem bench
// bench/models/gemm_mlp.toml --threads 2 --profile`, ONEDNN_MAX_CPU_ISA=AVX2)
// linear_grad_input went from 10.8 to 7.5 ms a step. With M = 32 or M >= 384, or rows not a multiple of 4
// KiB, the two run at the same speed and the copy is a loss, so it is made only where it was measured to pay.
// Deterministic: the choice depends on the shapes and the implementation oneDNN picked, never on a timing.
bool transposed_b_pays(const dnnl::matmul::primitive_desc& pd, const memory::desc& a, const memory::desc& b) {
  if (data_type_of(b) != memory::data_type::f32 || std::string(pd.impl_info_str()) != "gemm:jit")
    return false;
  const memory::dims ad = dims_of(a), bd = dims_of(b);
  const int64_t m = ad[ad.size() - 2], k = bd[bd.size() - 2], n = bd.back();
  const bool stored_as_is = b == view_md(Dims(bd.begin(), bd.end() - 2), k, n, false, TDM_F32);
  return stored_as_is && (n * sizeof(float)) % 4096 == 0 && m >= 64 && m <= 256;
}

}  // namespace

std::unique_ptr<Kernel> matmul_kernel(std::string name, const memory::desc& a, Slot sa, const memory::desc& b,
                                      Slot sb, const memory::desc& y, Slot sy, const memory::desc* bias,
                                      Slot sbias, const dnnl::post_ops& post, size_t& workspace,
                                      const Slot* addend) {
  if (addend != nullptr && post.len() != 0)
    throw std::logic_error(name + ": an addend takes the sum post-op, not other post-ops");
  auto k = std::make_unique<PrimKernel>(std::move(name));
  dnnl::primitive_attr attr = user_scratchpad_attr();
  if (addend != nullptr) {
    dnnl::post_ops sum;
    sum.append_sum(1.f);
    attr.set_post_ops(sum);
    const size_t bytes = y.get_size(), from = addend->index, to = sy.index;
    k->hook([bytes, from, to](void* const* in, void* const* out, char*) {
      if (in[from] != out[to]) std::memcpy(out[to], in[from], bytes);
    });
  } else {
    attr.set_post_ops(post);
  }
  const auto pd_with = [&](const memory::desc& w) { return matmul_pd(a, w, bias, y, attr); };
  dnnl::matmul::primitive_desc pd = pd_with(b);
  memory weights = k->bind(b, sb);
  if (transposed_b_pays(pd, a, b)) {
    const memory::dims bd = dims_of(b);
    const memory::desc bt =
        view_md(Dims(bd.begin(), bd.end() - 2), bd[bd.size() - 2], bd.back(), true, TDM_F32);
    const memory copy = k->bind(bt, {Slot::workspace, k->reserve(bt.get_size())});
    k->add<dnnl::reorder>(dnnl::reorder::primitive_desc(engine(), b, engine(), bt, user_scratchpad_attr()),
                          {{DNNL_ARG_FROM, weights}, {DNNL_ARG_TO, copy}});
    pd = pd_with(bt);
    weights = copy;
  }
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, k->bind(a, sa)}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, k->bind(y, sy)}};
  if (bias) args[DNNL_ARG_BIAS] = k->bind(*bias, sbias);
  k->add<dnnl::matmul>(pd, std::move(args));
  workspace = k->workspace_bytes();
  return k;
}

std::unique_ptr<Kernel> sgemm_kernel(const Check& c, const sgemm::Problem& p, size_t a_slot, size_t b_slot,
                                     size_t bias_slot, size_t& workspace, size_t addend_slot) {
  // The thread count of prepare is the one the workspace holds buffers for;
  // launches keep to it (the backend sets it once, from the host's `threads`).
  const int threads = omp_get_max_threads();
  workspace = sgemm::workspace_bytes(p, threads);
  return make_fn_kernel(
      "onednn:own:" + c.op().op() + "(sgemm:avx2)",
      [p, a_slot, b_slot, bias_slot, addend_slot, threads](void* const* in, void* const* out, void* ws) {
        if (p.accumulate && in[addend_slot] != out[0])
          std::memcpy(out[0], in[addend_slot], size_t(p.m * p.n) * sizeof(float));
        sgemm::run(p, static_cast<const float*>(in[a_slot]), static_cast<const float*>(in[b_slot]),
                   p.bias ? static_cast<const float*>(in[bias_slot]) : nullptr, static_cast<float*>(out[0]),
                   p.row_sums ? static_cast<float*>(out[1]) : nullptr, ws, threads);
      });
}

}  // namespace tandem::onednn
