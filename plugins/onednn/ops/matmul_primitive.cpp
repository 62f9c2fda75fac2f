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

// Whether y = a·b runs on oneDNN's sgemm (dnnl_sgemm, the "gemm:jit"
// routine) rather than on the matmul primitive oneDNN picked. oneDNN 2.6's
// f32 brgemm ("brg:avx512_core") reads a b stored as is ([K, N] row-major)
// slowly once N is wide, and oneDNN offers no other implementation of a dense
// f32 matmul; its sgemm reads the same operands in place. GPT-2 small's
// products at 1024 tokens (every linear_grad_input dx = dy·w and
// linear_grad_weight dw = dyᵀ·x; a linear's forward reads w transposed,
// which brgemm runs well), each timed alone, best of 5, 2 threads on an
// AVX-512 Xeon: the MLP's second layer dx (1024 x 3072 x 768) 92 -> 246
// GFLOP/s, its dw (768 x 3072 x 1024) 120 -> 309, the others 186-230 ->
// 204-258; on 1 thread 48-149 -> 109-164. A transposed copy of b for
// brgemm (as transposed_b_pays makes for the AVX2 sgemm) reached 197-248
// on 2 threads (4-6 % ahead of the sgemm on two of the eight shapes, 20 %
// behind on the MLP's) and 107-140 on 1 (behind on every shape), so the
// sgemm takes them all. Small products (below 2^25
// multiply-adds) were not measured and stay on the primitive. The choice
// depends on the shapes and the implementation oneDNN picked, never on a
// timing. oneDNN's sgemm takes its packing buffers from the heap (a few MiB,
// freed before it returns), the one allocation inside a launch.
bool jit_sgemm_pays(const dnnl::matmul::primitive_desc& pd, const memory::desc& a, const memory::desc& b,
                    const memory::desc& y) {
  if (std::string(pd.impl_info_str()) != "brg:avx512_core") return false;
  for (const memory::desc* md : {&a, &b, &y})
    if (data_type_of(*md) != memory::data_type::f32 || dims_of(*md).size() != 2) return false;
  const memory::dims ad = dims_of(a), bd = dims_of(b);
  const int64_t m = ad[0], k = ad[1], n = bd[1];
  const bool a_dense = a == view_md({}, m, k, false, TDM_F32) || a == view_md({}, m, k, true, TDM_F32);
  return a_dense && b == view_md({}, k, n, false, TDM_F32) && y == view_md({}, m, n, false, TDM_F32) &&
         m * n * k >= (int64_t(1) << 25);
}

// y = a·b (+ y when `accumulate`) on oneDNN's sgemm, a stored as is or
// transposed, b and y as is (jit_sgemm_pays).
void add_jit_sgemm(PrimKernel& kernel, const memory::desc& a, Slot sa, Slot sb, const memory::desc& y,
                   Slot sy, bool accumulate) {
  const memory::dims ad = dims_of(a), yd = dims_of(y);
  const int64_t m = ad[0], k = ad[1], n = yd[1];
  const bool a_transposed = a != view_md({}, m, k, false, TDM_F32);
  const char trans_a = a_transposed ? 'T' : 'N';
  const int64_t lda = a_transposed ? m : k;
  const float beta = accumulate ? 1.f : 0.f;
  kernel.hook(
      [=](void* const* in, void* const* out, char* ws) {
        const auto* pa = static_cast<const float*>(slot_address(sa, in, out, ws));
        const auto* pb = static_cast<const float*>(slot_address(sb, in, out, ws));
        auto* py = static_cast<float*>(slot_address(sy, in, out, ws));
        const dnnl_status_t status = dnnl_sgemm(trans_a, 'N', m, n, k, 1.f, pa, lda, pb, n, beta, py, n);
        if (status != dnnl_success)
          throw std::runtime_error("oneDNN's sgemm failed (status " + std::to_string(int(status)) +
                                   ") on a " + std::to_string(m) + " x " + std::to_string(n) + " x " +
                                   std::to_string(k) + " product");
      },
      "gemm:jit");
}

}  // namespace

void add_product(PrimKernel& kernel, const memory::desc& a, Slot sa, const memory::desc& b, Slot sb,
                 const memory::desc& y, Slot sy, const memory::desc* bias, Slot sbias,
                 const dnnl::primitive_attr& attr, bool accumulate) {
  dnnl::matmul::primitive_desc pd = matmul_pd(a, b, bias, y, attr);
  const bool only_the_sum = attr.get_post_ops().len() == (accumulate ? 1 : 0);
  if (bias == nullptr && only_the_sum && jit_sgemm_pays(pd, a, b, y))
    return add_jit_sgemm(kernel, a, sa, sb, y, sy, accumulate);
  memory weights = kernel.bind(b, sb);
  if (transposed_b_pays(pd, a, b)) {
    const memory::dims bd = dims_of(b);
    const memory::desc bt =
        view_md(Dims(bd.begin(), bd.end() - 2), bd[bd.size() - 2], bd.back(), true, TDM_F32);
    const memory copy = kernel.bind(bt, {Slot::workspace, kernel.reserve(bt.get_size())});
    kernel.add<dnnl::reorder>(
        dnnl::reorder::primitive_desc(engine(), b, engine(), bt, user_scratchpad_attr()),
        {{DNNL_ARG_FROM, weights}, {DNNL_ARG_TO, copy}});
    pd = matmul_pd(a, bt, bias, y, attr);
    weights = copy;
  }
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, kernel.bind(a, sa)}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, kernel.bind(y, sy)}};
  if (bias) args[DNNL_ARG_BIAS] = kernel.bind(*bias, sbias);
  kernel.add<dnnl::matmul>(pd, std::move(args));
}

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
  add_product(*k, a, sa, b, sb, y, sy, bias, sbias, attr, addend != nullptr);
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
