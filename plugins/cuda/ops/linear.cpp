// CUDA backend — linear (forward, grad input, grad weight) on cuBLAS
// (ops/gemm.hpp). Bias and activation of `linear` run as our own fused
// epilogue kernel (ops/activation.cu: one in-place pass), and dbias as our
// own per-channel reduction, rather than cuBLASLt epilogues: one code path
// for every dtype, and the same activation math as the standalone
// activation ops.
#include "ops/gemm.hpp"
#include "ops/launchers.hpp"

namespace tandem::cuda {
namespace {

math::Act linear_act(const Check& c) {
  const std::string a = c.string_attr("activation");
  if (a == "relu") return math::Act::Relu;
  if (a == "tanh") return math::Act::Tanh;
  if (a == "sigmoid") return math::Act::Sigmoid;
  return math::Act::None;  // "none", the catalog's only other value
}

// y[N,O] = act(x[N,I] · w[O,I]ᵀ + bias)
std::unique_ptr<Kernel> prepare_linear(CudaDevice& d, const OpView& v, size_t& workspace) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  const int64_t N = c.in(0).dims[0], I = c.in(0).dims[1], O = c.in(1).dims[0];
  const tdm_dtype yt = c.product_output_dtype(0, t);  // f32 from bf16/f16 operands too, bias likewise
  const bool has_bias = c.has_input(2);
  const math::Act act = linear_act(c);
  const Gemm g = make_gemm(d, t, yt, false, true, N, O, I);
  workspace = g.workspace_bytes;
  return make_kernel("linear:cublasGemmEx+epilogue",
                     [=](CudaStream& s, void* const* in, void* const* o, void* ws) {
                       g.run(s, in[0], in[1], o[0], ws);
                       launch_bias_act(yt, o[0], has_bias ? in[2] : nullptr, N, O, 1, act, s.get());
                     });
}

// dx[N,I] = dy[N,O] · w[O,I]
std::unique_ptr<Kernel> prepare_linear_grad_input(CudaDevice& d, const OpView& v, size_t& workspace) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  const int64_t N = c.in(0).dims[0], O = c.in(0).dims[1], I = c.in(1).dims[1];
  // dx = dy·w + addend: cuBLAS's beta = 1 over dx, which holds the addend
  // (copied there unless the host's plan passes it in place).
  const bool addend = c.has_input(2);
  Gemm g = make_gemm(d, t, false, false, N, I, O);
  g.beta = addend ? 1.0f : 0.0f;
  const size_t bytes = size_t(N * I) * dtype_size(t);
  workspace = g.workspace_bytes;
  return make_kernel("linear_grad_input:cublasGemmEx", [g, addend, bytes](CudaStream& s, void* const* in,
                                                                          void* const* o, void* ws) {
    if (addend && in[2] != o[0])
      TDM_CUDA_CHECK(cudaMemcpyAsync(o[0], in[2], bytes, cudaMemcpyDeviceToDevice, s.get()));
    g.run(s, in[0], in[1], o[0], ws);
  });
}

// dw[O,I] = dy[N,O]ᵀ · x[N,I];  dbias[O] = Σ_n dy[n,O] (both f32 over bf16/f16
// operands when declared so: the f32 sums as they are)
std::unique_ptr<Kernel> prepare_linear_grad_weight(CudaDevice& d, const OpView& v, size_t& workspace) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  const int64_t N = c.in(0).dims[0], O = c.in(0).dims[1], I = c.in(1).dims[1];
  const tdm_dtype wt = c.product_output_dtype(0, t);  // f32 from bf16/f16 operands too
  const bool dbias = v.int_attr("has_bias", 1) != 0 && c.has_output(1);
  const Gemm g = make_gemm(d, t, wt, true, false, O, I, N);
  // cuBLAS's workspace (0 or whole MiB, so what follows stays aligned),
  // then the dbias reduction's partials.
  const math::ChannelSumPlan bias_plan = math::channel_sum_plan(N, O, 1);
  workspace = g.workspace_bytes + (dbias ? bias_plan.workspace_bytes() : 0);
  return make_kernel("linear_grad_weight:cublasGemmEx+channel_sum", [=](CudaStream& s, void* const* in,
                                                                        void* const* o, void* ws) {
    g.run(s, in[0], in[1], o[0], ws);
    if (dbias)
      launch_channel_sum(t, in[0], wt, o[1], bias_plan, static_cast<char*>(ws) + g.workspace_bytes, s.get());
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("linear", prepare_linear);
  r.add("linear_grad_input", prepare_linear_grad_input);
  r.add("linear_grad_weight", prepare_linear_grad_weight);
});

}  // namespace

}  // namespace tandem::cuda
