// oneDNN backend — reduce_sum/reduce_mean (dnnl reduction primitive, f32
// accumulation) and data movement: reshape, copy, transpose, concat (own code,
// by element width, so every dtype is one code path).
#include <algorithm>

#include "common.hpp"

namespace tandem::onednn {

namespace {

std::unique_ptr<Kernel> reduce(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(1, 1, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims& x = c.in(0).dims;
  const std::vector<int64_t> axes_attr = c.ints_attr("axes", {});
  std::vector<bool> reduced(x.size(), axes_attr.empty());
  for (int64_t a : axes_attr) {
    const size_t k = c.axis(a, x.size(), "axis");
    if (reduced[k]) c.fail("axis " + std::to_string(a) + " is listed twice");
    reduced[k] = true;
  }
  const bool keep = c.int_attr("keepdims", 0) != 0;
  Dims kept, y;
  for (size_t k = 0; k < x.size(); ++k) {
    kept.push_back(reduced[k] ? 1 : x[k]);
    if (!reduced[k] || keep) y.push_back(reduced[k] ? 1 : x[k]);
  }
  c.output(0, dt, y);
  if (numel(x) == 0) c.unsupported("reducing an empty tensor is not implemented");
  const bool mean = op.op() == "reduce_mean";
  if (numel(x) == numel(kept)) {  // nothing to reduce: a copy
    const size_t bytes = size_t(numel(x)) * dtype_size(dt);
    return make_fn(c, [bytes](void* const* in, void* const* out, void*) {
      if (in[0] != out[0]) std::memcpy(out[0], in[0], bytes);
    });
  }
  auto k = std::make_unique<PrimKernel>(op.op());
  const dnnl::memory::desc src = plain_md(x, dt), dst = plain_md(kept.empty() ? Dims{1} : kept, dt);
  const dnnl::reduction::primitive_desc pd(
      dnnl::reduction::desc(mean ? dnnl::algorithm::reduction_mean : dnnl::algorithm::reduction_sum, src, dst,
                            0.f, 0.f),
      user_scratchpad_attr(), engine());
  k->add<dnnl::reduction>(
      pd, {{DNNL_ARG_SRC, k->bind(src, in_slot(0))}, {DNNL_ARG_DST, k->bind(dst, out_slot(0))}});
  ws = k->workspace_bytes();
  return k;
}

std::unique_ptr<Kernel> copy_like(const OpView& op, size_t&) {
  Check c(op);
  c.counts(1, 1, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kAll);
  if (op.op() == "copy")
    c.output(0, dt, c.in(0).dims);
  else if (!c.has_output(0) || c.out(0).dtype != dt || numel(c.out(0).dims) != numel(c.in(0).dims))
    c.fail("reshape needs the same dtype and element count: " + shape_str(c.in(0)) + " -> " +
           (c.has_output(0) ? shape_str(c.out(0)) : std::string("none")));
  const size_t bytes = size_t(numel(c.in(0).dims)) * dtype_size(dt);
  return make_fn(c, [bytes](void* const* in, void* const* out, void*) {
    if (in[0] != out[0]) std::memcpy(out[0], in[0], bytes);
  });
}

template <class W>
void transpose_rows(const W* x, W* y, const Dims& ydims, const Dims& src_stride) {
  const size_t r = ydims.size();
  const int64_t inner = ydims[r - 1], step = src_stride[r - 1];
  const int64_t rows = inner ? numel(ydims) / inner : 0;
#pragma omp parallel for schedule(static) if (rows * inner > kParallelGrain)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t off = 0, rest = row;
    for (size_t k = r - 1; k-- > 0;) {
      off += (rest % ydims[k]) * src_stride[k];
      rest /= ydims[k];
    }
    W* o = y + row * inner;
    for (int64_t i = 0; i < inner; ++i) o[i] = x[off + i * step];
  }
}

std::unique_ptr<Kernel> transpose(const OpView& op, size_t&) {
  Check c(op);
  c.counts(1, 1, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kAll);
  const Dims& x = c.in(0).dims;
  const size_t r = x.size();
  Dims rev(r);
  for (size_t k = 0; k < r; ++k) rev[k] = int64_t(r - 1 - k);
  const Dims perm = c.ints_attr("perm", rev);
  if (perm.size() != r) c.fail("perm must have " + std::to_string(r) + " entries");
  std::vector<bool> seen(r, false);
  Dims y(r), src_stride(r);
  const Dims xs = strides_of(x);
  for (size_t k = 0; k < r; ++k) {
    if (perm[k] < 0 || perm[k] >= int64_t(r) || seen[size_t(perm[k])]) c.fail("perm is not a permutation");
    seen[size_t(perm[k])] = true;
    y[k] = x[size_t(perm[k])];
    src_stride[k] = xs[size_t(perm[k])];
  }
  c.output(0, dt, y);
  const size_t width = dtype_size(dt);
  const size_t bytes = size_t(numel(x)) * width;
  if (r == 0 || numel(x) == 0) {
    return make_fn(c, [bytes](void* const* in, void* const* out, void*) {
      if (bytes) std::memcpy(out[0], in[0], bytes);
    });
  }
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    if (width == 1)
      transpose_rows(static_cast<const uint8_t*>(in[0]), static_cast<uint8_t*>(out[0]), y, src_stride);
    if (width == 2)
      transpose_rows(static_cast<const uint16_t*>(in[0]), static_cast<uint16_t*>(out[0]), y, src_stride);
    if (width == 4)
      transpose_rows(static_cast<const uint32_t*>(in[0]), static_cast<uint32_t*>(out[0]), y, src_stride);
    if (width == 8)
      transpose_rows(static_cast<const uint64_t*>(in[0]), static_cast<uint64_t*>(out[0]), y, src_stride);
  });
}

std::unique_ptr<Kernel> concat(const OpView& op, size_t&) {
  Check c(op);
  if (op.inputs().empty()) c.fail("concat needs at least one input");
  c.counts(1, SIZE_MAX, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kAll);
  const Dims& first = c.in(0).dims;
  if (first.empty()) c.fail("concat inputs must have rank >= 1");
  const size_t axis = c.axis(c.int_attr("axis", 0), first.size(), "axis");
  Dims y = first;
  y[axis] = 0;
  std::vector<size_t> chunk;  // bytes per outer index, per input
  int64_t inner = 1;
  for (size_t k = axis + 1; k < first.size(); ++k) inner *= first[k];
  for (size_t i = 0; i < op.inputs().size(); ++i) {
    c.input_dtype(i, {dt});
    Dims d = c.in(i).dims;
    if (d.size() != first.size()) c.fail("input " + std::to_string(i) + " has a different rank");
    y[axis] += d[axis];
    d[axis] = first[axis];
    if (d != first) c.fail("input " + std::to_string(i) + " differs outside the concat axis");
    chunk.push_back(size_t(c.in(i).dims[axis] * inner) * dtype_size(dt));
  }
  c.output(0, dt, y);
  int64_t outer = 1;
  for (size_t k = 0; k < axis; ++k) outer *= first[k];
  size_t row = 0;
  for (size_t b : chunk) row += b;
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    char* o = static_cast<char*>(out[0]);
#pragma omp parallel for schedule(static) if (outer * int64_t(row) > 4 * kParallelGrain)
    for (int64_t i = 0; i < outer; ++i) {
      size_t at = size_t(i) * row;
      for (size_t k = 0; k < chunk.size(); ++k) {
        std::memcpy(o + at, static_cast<const char*>(in[k]) + size_t(i) * chunk[k], chunk[k]);
        at += chunk[k];
      }
    }
  });
}

}  // namespace

void register_tensor(const Registrar& add) {
  add("reduce_sum", reduce);
  add("reduce_mean", reduce);
  add("reshape", copy_like);
  add("copy", copy_like);
  add("transpose", transpose);
  add("concat", concat);
}

}  // namespace tandem::onednn
