// CUDA backend — reduce_sum and reduce_mean over any set of axes. One block
// per output element; its threads stride over the reduced elements and
// accumulate in f32. The mean of zero elements is NaN (0/0), as in PyTorch.
#include <algorithm>

#include "ops/kernels.cuh"

namespace tandem::cuda {
namespace {

// kept: the output's dims with x's strides; red: reduced dims with x's strides.
template <class T>
__global__ void reduce_kernel(const T* x, T* y, Shape8 kept, Shape8 red, int64_t count, float divisor) {
  __shared__ float scratch[32];
  int64_t base = 0, o = blockIdx.x;
  for (int d = kept.rank - 1; d >= 0; --d) {
    base += (o % kept.dims[d]) * kept.strides[d];
    o /= kept.dims[d];
  }
  float acc = 0.0f;
  for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
    int64_t off = base, rr = r;
    for (int d = red.rank - 1; d >= 0; --d) {
      off += (rr % red.dims[d]) * red.strides[d];
      rr /= red.dims[d];
    }
    acc += ld(x, off);
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) st(y, blockIdx.x, acc / divisor);
}

template <bool kMean>
std::unique_ptr<Kernel> prepare_reduce(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(1, 1, 1, 1);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  const Dims x = c.in(0).dims;
  if (x.size() > kMaxRank) c.unsupported("rank above 8");
  std::vector<bool> reduced(x.size(), false);
  const std::vector<int64_t> axes = v.ints_attr("axes", {});
  if (axes.empty()) std::fill(reduced.begin(), reduced.end(), true);
  for (int64_t a : axes) {
    const size_t k = c.axis(a, x.size());
    if (reduced[k]) c.fail("axis " + std::to_string(a) + " is listed twice");
    reduced[k] = true;
  }
  const bool keepdims = v.int_attr("keepdims", 0) != 0;
  Shape8 kept, red;
  Dims out;
  int64_t stride = 1;
  std::vector<int64_t> strides(x.size());
  for (size_t k = x.size(); k-- > 0;) strides[k] = stride, stride *= x[k];
  for (size_t k = 0; k < x.size(); ++k) {
    Shape8& s = reduced[k] ? red : kept;
    s.dims[s.rank] = x[k];
    s.strides[s.rank++] = strides[k];
    if (!reduced[k])
      out.push_back(x[k]);
    else if (keepdims)
      out.push_back(1);
  }
  c.output(0, t, out);
  const int64_t outputs = numel(out), count = numel(x) / std::max<int64_t>(1, outputs);
  decline_if(c, one_block_per_limit(outputs, "output element"));
  const int64_t real_count = outputs == 0 ? 0 : count;
  int64_t rc = 1;
  for (int d = 0; d < red.rank; ++d) rc *= red.dims[d];
  const float divisor = kMean ? static_cast<float>(rc) : 1.0f;
  (void)real_count;
  const int threads = rc >= 1024 ? 256 : rc >= 128 ? 128 : 32;
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (outputs == 0) return;
      reduce_kernel<T><<<unsigned(outputs), threads, 0, s.get()>>>(
          static_cast<const T*>(in[0]), static_cast<T*>(o[0]), kept, red, rc, divisor);
    });
  });
  return k;
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("reduce_sum", prepare_reduce<false>);
  r.add("reduce_mean", prepare_reduce<true>);
});

}  // namespace

}  // namespace tandem::cuda
