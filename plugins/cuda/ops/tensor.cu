// CUDA backend — reshape, copy, transpose, concat, fill: every dtype, f64
// included. reshape and copy are one cudaMemcpyAsync (nothing when in place),
// concat is one cudaMemcpy2DAsync per input, transpose an own gather kernel
// over element-sized words (1, 2, 4 or 8 bytes), fill a grid-stride kernel
// storing the value converted as cast would (ops/convert.cuh).
#include "ops/convert.cuh"

namespace tandem::cuda {
namespace {

// copy, and reshape (kReshape): the same bytes, reshape with the output's shape.
template <bool kReshape>
std::unique_ptr<Kernel> prepare_copy(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const TensorShape& x = c.in(0);
  if (dtype_size(x.dtype) == 0) c.unsupported("dtype is not implemented");
  const size_t bytes = x.bytes();
  return make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void*) {
    if (bytes == 0 || in[0] == o[0]) return;
    TDM_CUDA_CHECK(cudaMemcpyAsync(o[0], in[0], bytes, cudaMemcpyDeviceToDevice, s.get()));
  });
}

// out: output dims with the input strides of each output dim.
template <class W>
__global__ void transpose_kernel(const W* x, W* y, int64_t n, Shape8 out) {
  TDM_GRID_STRIDE(i, n) {
    int64_t off = 0, r = i;
    for (int d = out.rank - 1; d >= 0; --d) {
      off += (r % out.dims[d]) * out.strides[d];
      r /= out.dims[d];
    }
    y[i] = x[off];
  }
}

std::unique_ptr<Kernel> prepare_transpose(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const TensorShape& x = c.in(0);
  const size_t width = dtype_size(x.dtype);
  if (width == 0) c.unsupported("dtype is not implemented");
  if (x.rank() > kMaxRank) c.unsupported("rank above 8");
  std::vector<int64_t> perm = v.ints_attr("perm", {});
  if (perm.empty())
    for (size_t k = x.rank(); k-- > 0;) perm.push_back(static_cast<int64_t>(k));
  // The registry has checked that perm is a permutation of x's dims.
  std::vector<int64_t> strides(x.rank());
  int64_t stride = 1;
  for (size_t k = x.rank(); k-- > 0;) strides[k] = stride, stride *= x.dims[k];
  Shape8 out;
  out.rank = static_cast<int>(x.rank());
  for (size_t k = 0; k < perm.size(); ++k) {
    const size_t p = static_cast<size_t>(perm[k]);
    out.dims[k] = x.dims[p];
    out.strides[k] = strides[p];
  }
  const int64_t n = x.numel();
  return make_kernel("transpose", [=](CudaStream& s, void* const* in, void* const* o, void*) {
    if (n == 0) return;
    const unsigned g = grid_for(n);
    if (width == 1)
      transpose_kernel<<<g, kThreads, 0, s.get()>>>(static_cast<const uint8_t*>(in[0]),
                                                    static_cast<uint8_t*>(o[0]), n, out);
    else if (width == 2)
      transpose_kernel<<<g, kThreads, 0, s.get()>>>(static_cast<const uint16_t*>(in[0]),
                                                    static_cast<uint16_t*>(o[0]), n, out);
    else if (width == 4)
      transpose_kernel<<<g, kThreads, 0, s.get()>>>(static_cast<const uint32_t*>(in[0]),
                                                    static_cast<uint32_t*>(o[0]), n, out);
    else
      transpose_kernel<<<g, kThreads, 0, s.get()>>>(static_cast<const uint64_t*>(in[0]),
                                                    static_cast<uint64_t*>(o[0]), n, out);
  });
}

std::unique_ptr<Kernel> prepare_concat(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const size_t inputs = v.inputs().size();
  // One kernel argument block holds the pointers of at most 4096 inputs.
  if (inputs > 4096) c.unsupported("concat of " + std::to_string(inputs) + " inputs (at most 4096)");
  const TensorShape& first = c.in(0);
  if (dtype_size(first.dtype) == 0) c.unsupported("dtype is not implemented");
  const size_t axis = c.axis(v.int_attr("axis", 0), first.rank());
  int64_t outer = 1, inner = 1, total = 0;
  for (size_t k = 0; k < axis; ++k) outer *= first.dims[k];
  for (size_t k = axis + 1; k < first.rank(); ++k) inner *= first.dims[k];
  // The registry has checked that the inputs have one dtype and rank and
  // differ only along the axis.
  std::vector<int64_t> widths;
  for (size_t i = 0; i < inputs; ++i) {
    const int64_t len = c.in(i).dims[axis];
    widths.push_back(len * inner);
    total += len;
  }
  const size_t elem = dtype_size(first.dtype), pitch = static_cast<size_t>(total * inner) * elem;
  return make_kernel("concat", [=](CudaStream& s, void* const* in, void* const* o, void*) {
    size_t column = 0;
    for (size_t i = 0; i < widths.size(); ++i) {
      const size_t w = static_cast<size_t>(widths[i]) * elem;
      if (w != 0 && outer != 0)
        TDM_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(o[0]) + column, pitch, in[i], w, w,
                                         static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, s.get()));
      column += w;
    }
  });
}

template <class D>
__global__ void fill_kernel(D* y, int64_t n, double value) {
  TDM_GRID_STRIDE(i, n) store_any(y, i, value);
}

std::unique_ptr<Kernel> prepare_fill(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const tdm_dtype t = c.out(0).dtype;  // `like`, if given, has y's shape and dtype (the rule)
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

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("reshape", prepare_copy<true>);
  r.add("copy", prepare_copy<false>);
  r.add("transpose", prepare_transpose);
  r.add("concat", prepare_concat);
  r.add("fill", prepare_fill);
});

}  // namespace

}  // namespace tandem::cuda
