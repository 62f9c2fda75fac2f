// oneDNN backend — matmul on dnnl::matmul (matmul_primitive.hpp): batched,
// numpy broadcasting of the batch dims, transposes through strides; a
// product of two matrices (no batch dims) in f32 on the own GEMM where it
// serves (sgemm.hpp).
#include "matmul_primitive.hpp"

namespace tandem::onednn {

namespace {

using dnnl::memory;

std::unique_ptr<Kernel> matmul(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const bool ta = c.int_attr("transpose_a") != 0, tb = c.int_attr("transpose_b") != 0;
  const Dims& a = c.in(0).dims;
  const Dims& b = c.in(1).dims;
  const Dims& y = c.out(0).dims;  // [broadcast batch dims, M, N] (the rule)
  const size_t ra = a.size(), rb = b.size();
  const int64_t m = ta ? a[ra - 1] : a[ra - 2], ka = ta ? a[ra - 2] : a[ra - 1];
  const int64_t n = tb ? b[rb - 2] : b[rb - 1];
  Dims ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2), by(y.begin(), y.end() - 2);
  if (numel(y) == 0) return no_op(c);
  if (ka == 0) {
    const size_t bytes = size_t(numel(y)) * dtype_size(dt);
    return make_fn(c, [bytes](void* const*, void* const* out, void*) { std::memset(out[0], 0, bytes); });
  }
  const sgemm::Problem own{m, n, ka, ta, tb, false, false};
  if (dt == TDM_F32 && ra == 2 && rb == 2 && sgemm::serves(own)) return sgemm_kernel(c, own, 0, 1, 0, ws);
  // oneDNN wants equal ranks: pad the batch dims with leading 1s.
  ba.insert(ba.begin(), by.size() - ba.size(), 1);
  bb.insert(bb.begin(), by.size() - bb.size(), 1);
  const memory::desc ma = view_md(ba, m, ka, ta, dt), mb = view_md(bb, ka, n, tb, dt);
  const memory::desc my = view_md(by, m, n, false, dt);
  return matmul_kernel("matmul", ma, in_slot(0), mb, in_slot(1), my, out_slot(0), nullptr, {}, {}, ws);
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) { r.add("matmul", matmul); });

}  // namespace

}  // namespace tandem::onednn
