// Reference backend — reduce_sum and reduce_mean.
//
// axes: the reduced dims (negative counts from the end; [] = all dims);
// keepdims=1 keeps them as size 1. Sums accumulate in double. The mean of
// zero elements is NaN (0/0), as in PyTorch.
#include <limits>

#include "common.hpp"

namespace tandem::reference {
namespace {

std::unique_ptr<Kernel> reduce(const OpView& view, bool mean) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const Dims x = c.in(0).dims;
  std::vector<bool> reduced(x.size(), false);
  const std::vector<int64_t> axes = c.ints_attr("axes", {});
  for (int64_t a : axes) reduced[c.axis(a, x.size(), "axis")] = true;  // none twice (the shape rule)
  if (axes.empty()) reduced.assign(x.size(), true);
  // The output with reduced dims kept as 1 (keepdims only changes the
  // output's declared dims, not its elements).
  Dims y_full;
  int64_t count = 1;
  for (size_t k = 0; k < x.size(); ++k) {
    y_full.push_back(reduced[k] ? 1 : x[k]);
    if (reduced[k]) count *= x[k];
  }
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const std::vector<double> xv = load<double>(in[0], dt, numel(x));
    std::vector<double> sum(size_t(numel(y_full)), 0.0);
    // Each x element adds into the output element it broadcasts from.
    for (int64_t i = 0; i < numel(x); ++i) {
      int64_t rest = i, target = 0, stride = 1;
      for (size_t k = x.size(); k-- > 0;) {
        const int64_t coord = rest % x[k];
        rest /= x[k];
        if (!reduced[k]) target += coord * stride;
        stride *= y_full[k];
      }
      sum[size_t(target)] += xv[size_t(i)];
    }
    if (mean)
      for (double& s : sum) s = count > 0 ? s / double(count) : std::numeric_limits<double>::quiet_NaN();
    store(out[0], dt, sum);
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("reduce_sum", [](const OpView& v, size_t&) { return reduce(v, false); });
  r.add("reduce_mean", [](const OpView& v, size_t&) { return reduce(v, true); });
});

}  // namespace

}  // namespace tandem::reference
