// oneDNN backend — reduce_sum / reduce_mean: the dnnl reduction primitive
// (f32 accumulation); an own column sum when the reduced axes are the leading
// ones (column_sum.hpp); a copy when nothing is reduced.
#include "column_sum.hpp"
#include "common.hpp"
#include "dnnl_api.hpp"

namespace tandem::onednn {

namespace {

template <bool kMean>
std::unique_ptr<Kernel> reduce(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims& x = c.in(0).dims;
  const std::vector<int64_t> axes_attr = c.ints_attr("axes", {});
  std::vector<bool> reduced(x.size(), axes_attr.empty());
  for (int64_t a : axes_attr) reduced[c.axis(a, x.size(), "axis")] = true;  // in range, once each (the rule)
  Dims kept;  // x's dims with the reduced ones 1 (y's elements, whatever keepdims)
  for (size_t k = 0; k < x.size(); ++k) kept.push_back(reduced[k] ? 1 : x[k]);
  if (numel(x) == 0) c.unsupported("reducing an empty tensor is not implemented");
  const bool mean = kMean;
  if (numel(x) == numel(kept)) {  // nothing to reduce: a copy
    const size_t bytes = size_t(numel(x)) * dtype_size(dt);
    return make_fn(c, [bytes](void* const* in, void* const* out, void*) {
      if (in[0] != out[0]) std::memcpy(out[0], in[0], bytes);
    });
  }
  // Reduced axes that are all leading ones ([R..., C...] -> [C...]): a sum
  // over the rows of an [R, C] matrix.
  const size_t lead = size_t(std::find(reduced.begin(), reduced.end(), false) - reduced.begin());
  if (lead < x.size() && std::find(reduced.begin() + lead, reduced.end(), true) == reduced.end()) {
    const int64_t cols = numel(Dims(x.begin() + lead, x.end())), rows = numel(x) / cols;
    const float scale = mean ? float(1.0 / double(rows)) : 1.f;
    return with_f32_bf16(dt, [&](auto tag_value) {
      using T = decltype(tag_value);
      return make_fn(c, [rows, cols, scale](void* const* in, void* const* out, void*) {
        column_sum<T>(in[0], out[0], rows, cols, scale);
      });
    });
  }
  auto k = std::make_unique<PrimKernel>(op.op());
  const dnnl::memory::desc src = plain_md(x, dt), dst = plain_md(kept.empty() ? Dims{1} : kept, dt);
  const auto pd = reduction_pd(mean ? dnnl::algorithm::reduction_mean : dnnl::algorithm::reduction_sum, src,
                               dst, user_scratchpad_attr());
  k->add<dnnl::reduction>(
      pd, {{DNNL_ARG_SRC, k->bind(src, in_slot(0))}, {DNNL_ARG_DST, k->bind(dst, out_slot(0))}});
  ws = k->workspace_bytes();
  return k;
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("reduce_sum", reduce<false>);
  r.add("reduce_mean", reduce<true>);
});

}  // namespace

}  // namespace tandem::onednn
