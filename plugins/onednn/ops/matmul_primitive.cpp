// oneDNN backend — dnnl::matmul plumbing (matmul_primitive.hpp).
#include "matmul_primitive.hpp"

#include <utility>

namespace tandem::onednn {

using dnnl::memory;

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

}  // namespace tandem::onednn
