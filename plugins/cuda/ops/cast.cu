// CUDA backend — cast between every pair of dtypes: one grid-stride kernel
// per pair, through double (ops/convert.cuh).
#include <algorithm>

#include "ops/convert.cuh"

namespace tandem::cuda {
namespace {

template <class S, class D>
__global__ void cast_kernel(const S* x, D* y, int64_t n) {
  TDM_GRID_STRIDE(i, n) store_any(y, i, load_any(x, i));
}

std::unique_ptr<Kernel> prepare_cast(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(1, 1, 1, 1);
  const std::vector<tdm_dtype> all = {TDM_F32, TDM_F64, TDM_BF16, TDM_F16, TDM_S8, TDM_U8, TDM_S32, TDM_S64};
  c.primary_dtype(0, all);
  const tdm_dtype dst = c.out(0).dtype;
  if (std::find(all.begin(), all.end(), dst) == all.end()) c.unsupported("output dtype is not implemented");
  c.output(0, dst, c.in(0).dims);
  const int64_t n = numel(c.in(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_any(c.in(0).dtype, [&](auto stag) {
    dispatch_any(dst, [&](auto dtag) {
      using S = decltype(stag);
      using D = decltype(dtag);
      k = make_kernel("cast", [=](CudaStream& s, void* const* in, void* const* o, void*) {
        if (n == 0) return;
        cast_kernel<S, D>
            <<<grid_for(n), kThreads, 0, s.get()>>>(static_cast<const S*>(in[0]), static_cast<D*>(o[0]), n);
      });
    });
  });
  return k;
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) { r.add("cast", prepare_cast); });

}  // namespace

}  // namespace tandem::cuda
