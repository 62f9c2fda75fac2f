// CUDA backend — reduce_sum and reduce_mean over any set of axes, in f32.
// Blocks of stage 1 each sum one chunk of one output's elements; with many
// elements per output and few outputs the elements are split into chunks
// and stage 2 folds each output's partials in order (math/reduce_plan.hpp),
// so a whole-tensor sum runs on every SM instead of one. The mean of zero
// elements is NaN (0/0), as in PyTorch.
#include <algorithm>

#include "math/reduce_plan.hpp"
#include "ops/kernels.cuh"

namespace tandem::cuda {
namespace {

// Offset of reduced element r from its output's first: r·step where the
// reduced axes collapse into one run (math::collapsed_step), else axis by axis.
__device__ __forceinline__ int64_t reduced_offset(int64_t r, const Shape8& red, int64_t step) {
  return step != 0 ? r * step : offset_of(r, red, red);
}

// Block (output o, split): thread t sums elements t, t + blockDim.x, ... of
// the split's chunk in order; the block's tree sum goes to y (one split) or
// to the partials.
template <class T>
__global__ void reduce_chunks_kernel(const T* x, T* y, float* partials, Shape8 kept, Shape8 red, int64_t step,
                                     math::ReducePlan p, float divisor) {
  __shared__ float scratch[32];
  const int64_t split = blockIdx.y;
  const int64_t base = offset_of(blockIdx.x, kept, kept);
  float acc = 0.0f;
  const int64_t end = p.end(split);
  for (int64_t r = p.begin(split) + threadIdx.x; r < end; r += blockDim.x)
    acc += ld(x, base + reduced_offset(r, red, step));
  acc = block_sum(acc, scratch);
  if (threadIdx.x != 0) return;
  if (p.splits == 1)
    st(y, blockIdx.x, acc / divisor);
  else
    partials[int64_t(blockIdx.x) * p.splits + split] = acc;
}

// Output o: the fold of its partials, thread t taking splits t, t + blockDim.x, ...
template <class T>
__global__ void reduce_fold_kernel(const float* partials, T* y, math::ReducePlan p, float divisor) {
  __shared__ float scratch[32];
  const float* mine = partials + int64_t(blockIdx.x) * p.splits;
  float acc = 0.0f;
  for (int64_t s = threadIdx.x; s < p.splits; s += blockDim.x) acc += mine[s];
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) st(y, blockIdx.x, acc / divisor);
}

template <bool kMean>
std::unique_ptr<Kernel> prepare_reduce(CudaDevice&, const OpView& v, size_t& workspace) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  const Dims x = c.in(0).dims;
  if (x.size() > kMaxRank) c.unsupported("rank above 8");
  std::vector<bool> reduced(x.size(), false);
  const std::vector<int64_t> axes = v.ints_attr("axes", {});
  if (axes.empty()) std::fill(reduced.begin(), reduced.end(), true);
  // The registry has checked the axes (in range, none twice) and y's dims.
  for (int64_t a : axes) reduced[c.axis(a, x.size())] = true;
  Shape8 kept, red;
  int64_t stride = 1;
  std::vector<int64_t> strides(x.size());
  for (size_t k = x.size(); k-- > 0;) strides[k] = stride, stride *= x[k];
  for (size_t k = 0; k < x.size(); ++k) {
    Shape8& s = reduced[k] ? red : kept;
    s.dims[s.rank] = x[k];
    s.strides[s.rank++] = strides[k];
  }
  const int64_t outputs = numel(c.out(0).dims);
  decline_if(c, one_block_per_limit(outputs, "output element"));
  int64_t count = 1;
  for (int d = 0; d < red.rank; ++d) count *= red.dims[d];
  const math::ReducePlan plan = math::reduce_plan(outputs, count);
  const int64_t step = math::collapsed_step(red.dims, red.strides, red.rank);
  const float divisor = kMean ? static_cast<float>(count) : 1.0f;
  // One split: as many threads as the elements can keep busy.
  const int threads = plan.splits > 1 || count >= 1024 ? math::kReduceThreads : count >= 128 ? 128 : 32;
  workspace = static_cast<size_t>(plan.partials()) * sizeof(float);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void* scratch) {
      if (outputs == 0) return;
      auto* y = static_cast<T*>(o[0]);
      auto* partials = static_cast<float*>(scratch);
      const dim3 grid(static_cast<unsigned>(outputs), static_cast<unsigned>(plan.splits));
      reduce_chunks_kernel<T><<<grid, threads, 0, s.get()>>>(static_cast<const T*>(in[0]), y, partials, kept,
                                                             red, step, plan, divisor);
      if (plan.splits > 1)
        reduce_fold_kernel<T>
            <<<unsigned(outputs), math::kReduceThreads, 0, s.get()>>>(partials, y, plan, divisor);
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
