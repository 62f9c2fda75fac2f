// CUDA backend — matmul and linear (forward, grad input, grad weight) on
// cuBLAS (cublasGemmStridedBatchedEx, f32 accumulation for every dtype).
// Bias and activation of `linear` run as our own fused epilogue kernel
// (ops/activation.cu: one in-place pass), and dbias as our own per-channel
// reduction, rather than cuBLASLt epilogues: one code path for every dtype,
// and the same activation math as the standalone activation ops.
//
// Row-major C = op(A)·op(B) is computed as column-major Cᵀ = op(B)ᵀ·op(A)ᵀ,
// so cuBLAS sees B first and nothing is transposed in memory.
#include <cublas_v2.h>

#include <utility>
#include <vector>

#include "device.hpp"
#include "ops/launchers.hpp"

namespace tandem::cuda {
namespace {

void check_blas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(status == CUBLAS_STATUS_ALLOC_FAILED ? TDM_OUT_OF_MEMORY : TDM_INTERNAL,
                std::string("cuda plugin: ") + what + " failed: " + cublasGetStatusString(status));
}

cublasHandle_t blas_handle(CudaStream& s) {
  if (s.blas == nullptr) {
    cublasHandle_t h = nullptr;
    check_blas(cublasCreate(&h), "cublasCreate");
    cublasSetStream(h, s.get());
    s.blas = h;
    s.blas_destroy = [](void* p) { cublasDestroy(static_cast<cublasHandle_t>(p)); };
  }
  return static_cast<cublasHandle_t>(s.blas);
}

cudaDataType_t data_type(tdm_dtype t) {
  return t == TDM_F32 ? CUDA_R_32F : t == TDM_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

// One (batched) row-major GEMM: y[b] = op(a[b]) · op(b[b]), strides 0 for a
// broadcast operand.
struct Gemm {
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  bool ta = false, tb = false;
  int64_t M = 0, N = 0, K = 0, batch = 1, stride_a = 0, stride_b = 0;

  // Batch dims that broadcast partially ([2,1] against [1,3]) cannot be one
  // strided call: then `offsets` holds each output batch's (a, b) element
  // offsets, resolved in prepare, and run issues one GEMM per batch.
  std::vector<std::pair<int64_t, int64_t>> offsets;
  int64_t elem = 4;  // bytes per element

  void run(cublasHandle_t h, const void* a, const void* b, void* y) const {
    if (M == 0 || N == 0 || batch == 0) return;
    if (offsets.empty()) return call(h, a, b, y, batch);
    for (size_t i = 0; i < offsets.size(); ++i)
      call(h, static_cast<const char*>(a) + offsets[i].first * elem,
           static_cast<const char*>(b) + offsets[i].second * elem,
           static_cast<char*>(y) + static_cast<int64_t>(i) * M * N * elem, 1);
  }

  void call(cublasHandle_t h, const void* a, const void* b, void* y, int64_t count) const {
    const float alpha = 1.0f, beta = 0.0f;
    const int64_t lda = ta ? M : K, ldb = tb ? K : N;
    check_blas(cublasGemmStridedBatchedEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          int(N), int(M), int(K), &alpha, b, type, int(ldb), stride_b, a,
                                          type, int(lda), stride_a, &beta, y, type, int(N), M * N, int(count),
                                          compute, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
  }
};

Gemm make_gemm(CudaDevice& d, tdm_dtype t, bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  const bool tf32 = t == TDM_F32 && d.tf32();
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
    throw Unsupported("cuda plugin: GEMM dimension above 2^31");
  Gemm g;
  g.type = data_type(t);
  g.compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  g.ta = ta, g.tb = tb, g.M = M, g.N = N, g.K = K;
  g.elem = static_cast<int64_t>(dtype_size(t));
  return g;
}

std::unique_ptr<Kernel> prepare_matmul(CudaDevice& d, const OpView& v, size_t&) {
  Check c(v);
  c.counts(2, 2, 1, 1);
  const tdm_dtype t = c.dtype(0, kFloat);
  const Dims &a = c.in(0).dims, &b = c.in(1).dims;
  if (c.in(1).dtype != t) c.fail("a and b must have the same dtype");
  if (a.size() < 2 || b.size() < 2) c.fail("a and b need rank >= 2");
  const bool ta = v.int_attr("transpose_a", 0) != 0, tb = v.int_attr("transpose_b", 0) != 0;
  const int64_t M = ta ? a[a.size() - 1] : a[a.size() - 2], K = ta ? a[a.size() - 2] : a[a.size() - 1];
  const int64_t Kb = tb ? b[b.size() - 1] : b[b.size() - 2], N = tb ? b[b.size() - 2] : b[b.size() - 1];
  if (K != Kb) c.fail("inner dimensions differ: " + dims_str(a) + " and " + dims_str(b));
  // Batch dims broadcast like numpy.
  const Dims ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  Dims batch(std::max(ba.size(), bb.size()), 1);
  for (size_t k = 0; k < batch.size(); ++k) {
    const int64_t x = k + ba.size() >= batch.size() ? ba[k + ba.size() - batch.size()] : 1;
    const int64_t y = k + bb.size() >= batch.size() ? bb[k + bb.size() - batch.size()] : 1;
    if (x != y && x != 1 && y != 1)
      c.fail("batch dims " + dims_str(ba) + " and " + dims_str(bb) + " do not broadcast");
    batch[k] = x == 1 ? y : x;
  }
  Dims out = batch;
  out.push_back(M);
  out.push_back(N);
  c.out_is(0, t, out);
  const int64_t nb = numel(batch);
  Gemm g = make_gemm(d, t, ta, tb, M, N, K);
  g.batch = nb;
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
  return make_kernel("matmul:cublasGemmStridedBatchedEx",
                     [g](CudaStream& s, void* const* in, void* const* o, void*) {
                       g.run(blas_handle(s), in[0], in[1], o[0]);
                     });
}

math::Act linear_act(const Check& c) {
  const std::string a = c.op().string_attr("activation", "none");
  if (a == "none") return math::Act::None;
  if (a == "relu") return math::Act::Relu;
  if (a == "tanh") return math::Act::Tanh;
  if (a == "sigmoid") return math::Act::Sigmoid;
  c.fail("activation must be none, relu, tanh or sigmoid, got '" + a + "'");
}

// y[N,O] = act(x[N,I] · w[O,I]ᵀ + bias)
std::unique_ptr<Kernel> prepare_linear(CudaDevice& d, const OpView& v, size_t&) {
  Check c(v);
  c.counts(2, 3, 1, 1);
  const tdm_dtype t = c.dtype(0, kFloat);
  if (c.in(0).rank() != 2 || c.in(1).rank() != 2) c.fail("x and w must be rank 2");
  const int64_t N = c.in(0).dims[0], I = c.in(0).dims[1], O = c.in(1).dims[0];
  c.in_is(1, t, {O, I});
  const bool has_bias = c.has_input(2);
  if (has_bias) c.in_is(2, t, {O});
  c.out_is(0, t, {N, O});
  const math::Act act = linear_act(c);
  const Gemm g = make_gemm(d, t, false, true, N, O, I);
  return make_kernel("linear:cublasGemmEx+epilogue",
                     [=](CudaStream& s, void* const* in, void* const* o, void*) {
                       g.run(blas_handle(s), in[0], in[1], o[0]);
                       launch_bias_act(t, o[0], has_bias ? in[2] : nullptr, N, O, 1, act, s.get());
                     });
}

// dx[N,I] = dy[N,O] · w[O,I]
std::unique_ptr<Kernel> prepare_linear_grad_input(CudaDevice& d, const OpView& v, size_t&) {
  Check c(v);
  c.counts(2, 2, 1, 1);
  const tdm_dtype t = c.dtype(0, kFloat);
  if (c.in(0).rank() != 2 || c.in(1).rank() != 2) c.fail("dy and w must be rank 2");
  const int64_t N = c.in(0).dims[0], O = c.in(0).dims[1], I = c.in(1).dims[1];
  c.in_is(1, t, {O, I});
  c.out_is(0, t, {N, I});
  const Gemm g = make_gemm(d, t, false, false, N, I, O);
  return make_kernel("linear_grad_input:cublasGemmEx",
                     [g](CudaStream& s, void* const* in, void* const* o, void*) {
                       g.run(blas_handle(s), in[0], in[1], o[0]);
                     });
}

// dw[O,I] = dy[N,O]ᵀ · x[N,I];  dbias[O] = Σ_n dy[n,O]
std::unique_ptr<Kernel> prepare_linear_grad_weight(CudaDevice& d, const OpView& v, size_t&) {
  Check c(v);
  c.counts(2, 2, 1, 2);
  const tdm_dtype t = c.dtype(0, kFloat);
  if (c.in(0).rank() != 2 || c.in(1).rank() != 2) c.fail("dy and x must be rank 2");
  const int64_t N = c.in(0).dims[0], O = c.in(0).dims[1], I = c.in(1).dims[1];
  c.in_is(1, t, {N, I});
  c.out_is(0, t, {O, I});
  const bool dbias = v.int_attr("has_bias", 1) != 0 && c.has_output(1);
  if (dbias) c.out_is(1, t, {O});
  const Gemm g = make_gemm(d, t, true, false, O, I, N);
  return make_kernel("linear_grad_weight:cublasGemmEx+channel_sum",
                     [=](CudaStream& s, void* const* in, void* const* o, void*) {
                       g.run(blas_handle(s), in[0], in[1], o[0]);
                       if (dbias) launch_channel_sum(t, in[0], o[1], N, O, 1, s.get());
                     });
}

}  // namespace

void register_blas(const Registrar& add) {
  add("matmul", prepare_matmul);
  add("linear", prepare_linear);
  add("linear_grad_input", prepare_linear_grad_input);
  add("linear_grad_weight", prepare_linear_grad_weight);
}

}  // namespace tandem::cuda
