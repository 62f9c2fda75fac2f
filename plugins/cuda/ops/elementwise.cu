// CUDA backend — binary ops with numpy broadcasting (add, sub, mul) and
// scale. One grid-stride kernel each; the broadcast index map is built once
// in prepare and passed by value. Where both inputs have the output's shape
// (a residual add, amp's products) the element index is the offset: no
// division or modulo per element.

#include "ops/kernels.cuh"

namespace tandem::cuda {
namespace {

enum class Bin { Add, Sub, Mul };

template <class T>
struct Arith {  // floating storage: compute in f32
  __device__ static float load(const T* p, int64_t i) { return ld(p, i); }
  __device__ static void store(T* p, int64_t i, float v) { st(p, i, v); }
  using C = float;
};
template <>
struct Arith<int32_t> {  // s32 wraps like two's complement (computed in 64 bits)
  __device__ static int64_t load(const int32_t* p, int64_t i) { return p[i]; }
  __device__ static void store(int32_t* p, int64_t i, int64_t v) {
    p[i] = static_cast<int32_t>(static_cast<uint32_t>(v));
  }
  using C = int64_t;
};

template <class T, Bin op>
__global__ void binary_kernel(const T* a, const T* b, T* y, int64_t n, Shape8 out, Shape8 sa, Shape8 sb) {
  using A = Arith<T>;
  TDM_GRID_STRIDE(i, n) {
    const typename A::C x = A::load(a, offset_of(i, out, sa));
    const typename A::C z = A::load(b, offset_of(i, out, sb));
    A::store(y, i, op == Bin::Add ? x + z : op == Bin::Sub ? x - z : x * z);
  }
}

template <class T, Bin op>
__global__ void same_shape_kernel(const T* a, const T* b, T* y, int64_t n) {
  using A = Arith<T>;
  TDM_GRID_STRIDE(i, n) {
    const typename A::C x = A::load(a, i), z = A::load(b, i);
    A::store(y, i, op == Bin::Add ? x + z : op == Bin::Sub ? x - z : x * z);
  }
}

// Broadcast strides of `in` against output dims (numpy: align on the right),
// which the registry has checked `in` broadcasts to.
Shape8 broadcast_strides(const Dims& in, const Dims& out) {
  Shape8 s;
  s.rank = static_cast<int>(out.size());
  const size_t shift = out.size() - in.size();
  int64_t stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    s.dims[d] = out[d];
    if (d < shift) continue;
    const int64_t dim = in[d - shift];
    s.strides[d] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  return s;
}

template <Bin op>
std::unique_ptr<Kernel> prepare_binary(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, {TDM_F32, TDM_BF16, TDM_F16, TDM_S32});
  // The registry has checked that b has a's dtype and that y is their broadcast.
  const Dims &a = c.in(0).dims, &b = c.in(1).dims, &out = c.out(0).dims;
  if (out.size() > kMaxRank) c.unsupported("rank above 8");
  const Shape8 so = broadcast_strides(out, out), sa = broadcast_strides(a, out),
               sb = broadcast_strides(b, out);
  const int64_t n = numel(out);
  const bool same_shape = a == out && b == out;
  auto body = [&](auto tag) -> std::unique_ptr<Kernel> {
    using T = decltype(tag);
    return make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (n == 0) return;
      if (same_shape) {
        same_shape_kernel<T, op><<<grid_for(n), kThreads, 0, s.get()>>>(
            static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), static_cast<T*>(o[0]), n);
        return;
      }
      binary_kernel<T, op><<<grid_for(n), kThreads, 0, s.get()>>>(
          static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), static_cast<T*>(o[0]), n, so, sa, sb);
    });
  };
  if (t == TDM_S32) return body(int32_t{});
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) { k = body(tag); });
  return k;
}

template <class T>
__global__ void scale_kernel(const T* x, T* y, int64_t n, float alpha, float beta) {
  TDM_GRID_STRIDE(i, n) st(y, i, alpha * ld(x, i) + beta);
}

std::unique_ptr<Kernel> prepare_scale(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  const float alpha = static_cast<float>(v.float_attr("alpha", 1.0));
  const float beta = static_cast<float>(v.float_attr("beta", 0.0));
  const int64_t n = numel(c.in(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel("scale", [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (n == 0) return;
      scale_kernel<T><<<grid_for(n), kThreads, 0, s.get()>>>(static_cast<const T*>(in[0]),
                                                             static_cast<T*>(o[0]), n, alpha, beta);
    });
  });
  return k;
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("add", prepare_binary<Bin::Add>);
  r.add("sub", prepare_binary<Bin::Sub>);
  r.add("mul", prepare_binary<Bin::Mul>);
  r.add("scale", prepare_scale);
});

}  // namespace

}  // namespace tandem::cuda
