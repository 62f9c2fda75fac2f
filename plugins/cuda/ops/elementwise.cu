// CUDA backend — binary ops with numpy broadcasting (add, sub, mul), scale,
// fill, cast. One grid-stride kernel each; the broadcast index map is built
// once in prepare and passed by value.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

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

// Broadcast strides of `in` against output dims (numpy: align on the right).
Shape8 broadcast_strides(const Check& c, const Dims& in, const Dims& out) {
  Shape8 s;
  s.rank = static_cast<int>(out.size());
  const size_t shift = out.size() - in.size();
  int64_t stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    s.dims[d] = out[d];
    if (d < shift) continue;
    const int64_t dim = in[d - shift];
    if (dim != out[d] && dim != 1)
      c.fail("input shape " + dims_str(in) + " does not broadcast to " + dims_str(out));
    s.strides[d] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  return s;
}

template <Bin op>
std::unique_ptr<Kernel> prepare_binary(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(2, 2, 1, 1);
  const tdm_dtype t = c.dtype(0, {TDM_F32, TDM_BF16, TDM_F16, TDM_S32});
  const Dims &a = c.in(0).dims, &b = c.in(1).dims;
  if (c.in(1).dtype != t) c.fail("inputs must have the same dtype");
  Dims out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t da = k + a.size() >= out.size() ? a[k + a.size() - out.size()] : 1;
    const int64_t db = k + b.size() >= out.size() ? b[k + b.size() - out.size()] : 1;
    if (da != db && da != 1 && db != 1)
      c.fail("shapes " + dims_str(a) + " and " + dims_str(b) + " do not broadcast");
    out[k] = da == 1 ? db : da;
  }
  c.out_is(0, t, out);
  if (out.size() > kMaxRank) c.unsupported("rank above 8");
  const Shape8 so = broadcast_strides(c, out, out), sa = broadcast_strides(c, a, out),
               sb = broadcast_strides(c, b, out);
  const int64_t n = numel(out);
  auto body = [&](auto tag) -> std::unique_ptr<Kernel> {
    using T = decltype(tag);
    return make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (n == 0) return;
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
  c.counts(1, 1, 1, 1);
  const tdm_dtype t = c.dtype(0, kFloat);
  c.out_is(0, t, c.in(0).dims);
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

// ---- cast and fill: every dtype (f64 included), through double -------------

template <class T>
constexpr bool kHalf = std::is_same_v<T, bf16_t> || std::is_same_v<T, f16_t>;

// double -> float rounded to odd: toward zero, then the last bit set when
// inexact. Rounding that float to a 16-bit format (>= 2 fewer bits) is then
// the correctly rounded result of the double: no double-rounding error.
__device__ __forceinline__ float to_float_odd(double v) {
  const float f = __double2float_rz(v);
  if (static_cast<double>(f) == v || isnan(v) || isinf(f)) return f;
  return __uint_as_float(__float_as_uint(f) | 1u);
}

template <class T>
__device__ __forceinline__ double load_any(const T* p, int64_t i) {
  if constexpr (kHalf<T> || std::is_same_v<T, float>)
    return static_cast<double>(math::to_float(p[i]));
  else
    return static_cast<double>(p[i]);
}

// Integers: round to nearest-even, saturate, NaN -> 0 (catalog cast rule).
template <class T>
__device__ __forceinline__ void store_any(T* p, int64_t i, double v) {
  if constexpr (std::is_same_v<T, double>) {
    p[i] = v;
  } else if constexpr (std::is_same_v<T, float>) {
    p[i] = static_cast<float>(v);
  } else if constexpr (kHalf<T>) {
    p[i] = math::from_float<T>(to_float_odd(v));
  } else {
    if (isnan(v)) {
      p[i] = 0;
      return;
    }
    const double lo = static_cast<double>(std::numeric_limits<T>::min());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    const double r = rint(v);
    p[i] = r <= lo   ? std::numeric_limits<T>::min()
           : r >= hi ? std::numeric_limits<T>::max()
                     : static_cast<T>(r);
  }
}

template <class S, class D>
__global__ void cast_kernel(const S* x, D* y, int64_t n) {
  TDM_GRID_STRIDE(i, n) store_any(y, i, load_any(x, i));
}

template <class D>
__global__ void fill_kernel(D* y, int64_t n, double value) {
  TDM_GRID_STRIDE(i, n) store_any(y, i, value);
}

template <class F>
void dispatch_any(tdm_dtype t, F&& f) {
  switch (t) {
    case TDM_S8:
      return f(int8_t{});
    case TDM_U8:
      return f(uint8_t{});
    case TDM_S32:
      return f(int32_t{});
    case TDM_S64:
      return f(int64_t{});
    case TDM_F64:
      return f(double{});
    default:
      return dispatch_float(t, f);
  }
}

std::unique_ptr<Kernel> prepare_cast(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(1, 1, 1, 1);
  const std::vector<tdm_dtype> all = {TDM_F32, TDM_F64, TDM_BF16, TDM_F16, TDM_S8, TDM_U8, TDM_S32, TDM_S64};
  c.dtype(0, all);
  const tdm_dtype dst = c.out(0).dtype;
  if (std::find(all.begin(), all.end(), dst) == all.end()) c.unsupported("output dtype is not implemented");
  c.out_is(0, dst, c.in(0).dims);
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

std::unique_ptr<Kernel> prepare_fill(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(0, 1, 1, 1);
  const tdm_dtype t = c.out(0).dtype;
  if (c.has_input(0) && (c.in(0).dtype != t || c.in(0).dims != c.out(0).dims))
    c.fail("input 0 (like) must have the output's shape and dtype");
  const double value = v.float_attr("value", 0.0);
  const int64_t n = numel(c.out(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_any(t, [&](auto tag) {
    using D = decltype(tag);
    k = make_kernel("fill", [=](CudaStream& s, void* const*, void* const* o, void*) {
      if (n == 0) return;
      fill_kernel<D><<<grid_for(n), kThreads, 0, s.get()>>>(static_cast<D*>(o[0]), n, value);
    });
  });
  return k;
}

}  // namespace

void register_elementwise(const Registrar& add) {
  add("add", prepare_binary<Bin::Add>);
  add("sub", prepare_binary<Bin::Sub>);
  add("mul", prepare_binary<Bin::Mul>);
  add("scale", prepare_scale);
  add("cast", prepare_cast);
  add("fill", prepare_fill);
}

}  // namespace tandem::cuda
