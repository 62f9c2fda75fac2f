// oneDNN backend — matmul, linear and linear's gradients, all dnnl::matmul.
//
// Transposes never move data: a transposed operand is described by a memory
// descriptor whose last two strides are swapped, and oneDNN's brgemm reads it
// in place. linear's bias and activation are fused (bias argument + eltwise
// post-op); dbias is an own column sum over the batch dim (see
// linear_grad_weight).
#include <algorithm>

#include "common.hpp"

namespace tandem::onednn {

namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

// [batch..., rows, cols] view of a dense tensor stored as [batch..., rows, cols]
// (transposed = false) or as [batch..., cols, rows] (transposed = true).
memory::desc view_md(const Dims& batch, int64_t rows, int64_t cols, bool transposed, tdm_dtype dt) {
  Dims physical = batch;
  physical.push_back(transposed ? cols : rows);
  physical.push_back(transposed ? rows : cols);
  Dims strides = strides_of(physical);
  Dims dims = batch;
  dims.push_back(rows);
  dims.push_back(cols);
  if (transposed) std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  return memory::desc(to_dnnl(dims), dnnl_type(dt), to_dnnl(strides));
}

// db[j] = sum over rows i of dy[i, j] for a dense [n, o] dy; columns split
// across threads in blocks of 256 when the tensor is large.
template <class T>
void column_sum(const void* src, void* dst, int64_t n, int64_t o) {
  const T* dy = static_cast<const T*>(src);
  T* db = static_cast<T*>(dst);
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (o + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n * o > kParallelGrain && blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t j0 = b * kBlock, width = std::min(kBlock, o - j0);
    float acc[kBlock];
    for (int64_t j = 0; j < width; ++j) acc[j] = ld(dy, j0 + j);
    for (int64_t i = 1; i < n; ++i) {
      const T* row = dy + i * o + j0;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) acc[j] += ld(row, j);
    }
    for (int64_t j = 0; j < width; ++j) st(db, j0 + j, acc[j]);
  }
}

std::unique_ptr<Kernel> matmul_kernel(std::string name, const memory::desc& a, Slot sa, const memory::desc& b,
                                      Slot sb, const memory::desc& y, Slot sy, const memory::desc* bias,
                                      Slot sbias, const dnnl::post_ops& post, size_t& workspace) {
  auto k = std::make_unique<PrimKernel>(std::move(name));
  dnnl::primitive_attr attr = user_scratchpad_attr();
  attr.set_post_ops(post);
  const auto d = bias ? dnnl::matmul::desc(a, b, *bias, y) : dnnl::matmul::desc(a, b, y);
  const dnnl::matmul::primitive_desc pd(d, attr, engine());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, k->bind(a, sa)}, {DNNL_ARG_WEIGHTS, k->bind(b, sb)}, {DNNL_ARG_DST, k->bind(y, sy)}};
  if (bias) args[DNNL_ARG_BIAS] = k->bind(*bias, sbias);
  k->add<dnnl::matmul>(pd, std::move(args));
  workspace = k->workspace_bytes();
  return k;
}

std::unique_ptr<Kernel> matmul(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(2, 2, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  c.input_dtype(1, {dt});
  c.input_rank_at_least(0, 2);
  c.input_rank_at_least(1, 2);
  const bool ta = c.int_attr("transpose_a", 0) != 0, tb = c.int_attr("transpose_b", 0) != 0;
  const Dims& a = c.in(0).dims;
  const Dims& b = c.in(1).dims;
  const size_t ra = a.size(), rb = b.size();
  const int64_t m = ta ? a[ra - 1] : a[ra - 2], ka = ta ? a[ra - 2] : a[ra - 1];
  const int64_t kb = tb ? b[rb - 1] : b[rb - 2], n = tb ? b[rb - 2] : b[rb - 1];
  if (ka != kb) c.fail("inner dimensions differ: " + shape_str(c.in(0)) + " x " + shape_str(c.in(1)));
  Dims ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2), by;
  if (!broadcast_shapes(ba, bb, by))
    c.fail("batch dimensions do not broadcast: " + dims_str(ba) + ", " + dims_str(bb));
  Dims y = by;
  y.push_back(m);
  y.push_back(n);
  c.output(0, dt, y);
  if (numel(y) == 0) return make_fn(c, [](void* const*, void* const*, void*) {});
  if (ka == 0) {
    const size_t bytes = size_t(numel(y)) * dtype_size(dt);
    return make_fn(c, [bytes](void* const*, void* const* out, void*) { std::memset(out[0], 0, bytes); });
  }
  // oneDNN wants equal ranks: pad the batch dims with leading 1s.
  ba.insert(ba.begin(), by.size() - ba.size(), 1);
  bb.insert(bb.begin(), by.size() - bb.size(), 1);
  const memory::desc ma = view_md(ba, m, ka, ta, dt), mb = view_md(bb, ka, n, tb, dt);
  const memory::desc my = view_md(by, m, n, false, dt);
  return matmul_kernel("matmul", ma, in_slot(0), mb, in_slot(1), my, out_slot(0), nullptr, {}, {}, ws);
}

std::unique_ptr<Kernel> linear(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(2, 3, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  c.input_dtype(1, {dt});
  if (c.in(0).rank() != 2 || c.in(1).rank() != 2) c.fail("x and w must be rank 2");
  const int64_t n = c.in(0).dims[0], i = c.in(0).dims[1], o = c.in(1).dims[0];
  c.input_shape(1, {o, i});
  const bool bias = c.has_input(2);
  if (bias) c.input(2, dt, {o});
  c.output(0, dt, {n, o});
  const std::string act = c.string_attr("activation", "none");
  dnnl::post_ops post;
  if (act == "relu")
    post.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  else if (act == "tanh")
    post.append_eltwise(1.f, dnnl::algorithm::eltwise_tanh, 0.f, 0.f);
  else if (act == "sigmoid")
    post.append_eltwise(1.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f);
  else if (act != "none")
    c.fail("activation must be none/relu/tanh/sigmoid, got '" + act + "'");
  if (n * o == 0) return make_fn(c, [](void* const*, void* const*, void*) {});
  if (i == 0) c.unsupported("an empty reduction dim (I = 0) is not implemented");
  const memory::desc mx = view_md({}, n, i, false, dt), mw = view_md({}, i, o, true, dt);
  const memory::desc my = view_md({}, n, o, false, dt), mbias = view_md({}, 1, o, false, dt);
  return matmul_kernel("linear", mx, in_slot(0), mw, in_slot(1), my, out_slot(0), bias ? &mbias : nullptr,
                       in_slot(2), post, ws);
}

std::unique_ptr<Kernel> linear_grad_input(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(2, 2, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  c.input_dtype(1, {dt});
  if (c.in(0).rank() != 2 || c.in(1).rank() != 2) c.fail("dy and w must be rank 2");
  const int64_t n = c.in(0).dims[0], o = c.in(0).dims[1], i = c.in(1).dims[1];
  c.input_shape(1, {o, i});
  c.output(0, dt, {n, i});
  if (n * i == 0 || o == 0) c.unsupported("empty dims are not implemented");
  return matmul_kernel("linear_grad_input", view_md({}, n, o, false, dt), in_slot(0),
                       view_md({}, o, i, false, dt), in_slot(1), view_md({}, n, i, false, dt), out_slot(0),
                       nullptr, {}, {}, ws);
}

std::unique_ptr<Kernel> linear_grad_weight(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(2, 2, 1, 2);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  c.input_dtype(1, {dt});
  if (c.in(0).rank() != 2 || c.in(1).rank() != 2) c.fail("dy and x must be rank 2");
  const int64_t n = c.in(0).dims[0], o = c.in(0).dims[1], i = c.in(1).dims[1];
  c.input_shape(1, {n, i});
  c.output(0, dt, {o, i});
  const bool has_bias = c.int_attr("has_bias", 1) != 0;
  if (has_bias != c.has_output(1))
    c.fail(std::string("has_bias = ") + (has_bias ? "1 requires" : "0 forbids") + " the dbias output");
  if (has_bias) c.output(1, dt, {o});
  if (n == 0 || o * i == 0) c.unsupported("empty dims are not implemented");
  auto k = std::make_unique<PrimKernel>("linear_grad_weight");
  const memory::desc mdy_t = view_md({}, o, n, true, dt), mx = view_md({}, n, i, false, dt);
  const memory::desc mdw = view_md({}, o, i, false, dt);
  const dnnl::primitive_attr attr = user_scratchpad_attr();
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(mdy_t, mx, mdw), attr, engine());
  k->add<dnnl::matmul>(pd, {{DNNL_ARG_SRC, k->bind(mdy_t, in_slot(0))},
                            {DNNL_ARG_WEIGHTS, k->bind(mx, in_slot(1))},
                            {DNNL_ARG_DST, k->bind(mdw, out_slot(0))}});
  if (has_bias) {
    // Own column sum, not dnnl::reduction: oneDNN 2.6 has only its reference
    // (ref:any) implementation for this [N, O] -> [1, O] sum, which cost more
    // than the matmul beside it on the MLPs. Rows are added in order (f32
    // accumulators), so the result is deterministic for any thread count.
    with_f32_bf16(dt, [&](auto tag_value) {
      using T = decltype(tag_value);
      k->hook([n, o](void* const* in, void* const* out, char*) { column_sum<T>(in[0], out[1], n, o); });
    });
  }
  ws = k->workspace_bytes();
  return k;
}

}  // namespace

void register_matmul(const Registrar& add) {
  add("matmul", matmul);
  add("linear", linear);
  add("linear_grad_input", linear_grad_input);
  add("linear_grad_weight", linear_grad_weight);
}

}  // namespace tandem::onednn
