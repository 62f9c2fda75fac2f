// CUDA backend — rotary position embedding and its gradient. The angle of a
// pair depends on (t, i) only, so a thread owns one (t, i), forms its cosine
// and sine once (in double, math/rope.hpp, with the SDK's frequency) and rotates that pair in a run of
// the leading rows; grid.y splits the leading rows so a short sequence (a
// decoding step) still fills the GPU. position_offset is read on the device:
// one prepared kernel serves every decoding position without a host sync.
#include <algorithm>
#include <cmath>

#include "math/rope.hpp"
#include "ops/kernels.cuh"

namespace tandem::cuda {
namespace {

// Leading rows each thread rotates with one cosine/sine (at least).
constexpr int64_t kRowsPerThread = 16;

struct Rope {
  int64_t lead, T, half;
  RopeFrequency frequency;
  float sign;  // +1 rope, −1 rope_grad (rotation by −θ)
};

template <class T>
__global__ void rope_kernel(const T* x, T* y, const int64_t* position_offset, Rope r) {
  const int64_t offset = position_offset ? *position_offset : 0;
  TDM_GRID_STRIDE(k, r.T * r.half) {
    const int64_t t = k / r.half, i = k % r.half;
    float c, s;
    math::rope_cos_sin(math::rope_angle(offset + t, i, r.half, r.frequency), c, s);
    s *= r.sign;
    for (int64_t l = blockIdx.y; l < r.lead; l += gridDim.y) {
      const int64_t lo = (l * r.T + t) * 2 * r.half + i, hi = lo + r.half;
      float y_lo, y_hi;
      math::rope_rotate(ld(x, lo), ld(x, hi), c, s, y_lo, y_hi);
      st(y, lo, y_lo);
      st(y, hi, y_hi);
    }
  }
}

// rope, and its gradient (kGrad): the inverse rotation.
template <bool kGrad>
std::unique_ptr<Kernel> prepare_rope(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  // The registry has checked x [..., T, D] with D even and the s64 offset.
  const Dims x = c.in(0).dims;
  const int64_t D = x.back(), seq = x[x.size() - 2];
  const bool has_offset = c.has_input(1);
  Rope r{};
  r.T = seq, r.half = D / 2;
  r.lead = D == 0 || seq == 0 ? 0 : numel(x) / (D * seq);
  r.frequency = rope_frequency_of(c);
  r.sign = kGrad ? -1.0f : 1.0f;
  const int64_t pairs = r.T * r.half;
  const unsigned split =
      static_cast<unsigned>(std::min<int64_t>(65535, (r.lead + kRowsPerThread - 1) / kRowsPerThread));
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (pairs == 0 || r.lead == 0) return;
      rope_kernel<T><<<dim3(grid_for(pairs), split), kThreads, 0, s.get()>>>(
          static_cast<const T*>(in[0]), static_cast<T*>(o[0]),
          has_offset ? static_cast<const int64_t*>(in[1]) : nullptr, r);
    });
  });
  return k;
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("rope", prepare_rope<false>);
  r.add("rope_grad", prepare_rope<true>);
});

}  // namespace

}  // namespace tandem::cuda
