// Reference backend — dropout with a counter-based mask every backend can
// reproduce bit for bit (sdk/ops.md, "dropout").
//
// Element i (flat, 0-based) is kept iff u(seed, i) >= p, where u is the top
// 24 bits of SplitMix64's finaliser applied to seed + (i+1)·golden_gamma,
// scaled to [0, 1). Kept elements are scaled by 1/(1-p).
#include <cstdint>

#include "common.hpp"
#include "tandem/dropout_mask.hpp"

namespace tandem::reference {
namespace {

std::unique_ptr<Kernel> dropout(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const Dims shape = c.in(0).dims;
  const bool has_offset = c.has_input(1);
  const double p = c.float_attr("p");  // in [0, 1] (the catalog)
  const uint64_t base_seed = static_cast<uint64_t>(c.int_attr("seed"));
  return make_kernel(c, [=](void* const* in, void* const* out) {
    // The per-step offset is data, so a new mask each step needs no new kernel.
    const uint64_t seed =
        base_seed + (has_offset ? static_cast<uint64_t>(*static_cast<const int64_t*>(in[1])) : 0);
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = numel(shape);
      std::vector<T> y = load<T>(in[0], dt, n);
      auto* mask = static_cast<uint8_t*>(out[1]);
      for (int64_t i = 0; i < n; ++i) {
        const bool keep = p == 0.0 || dropout_uniform(seed, uint64_t(i)) >= p;
        y[size_t(i)] = keep ? T(y[size_t(i)] / T(1.0 - p)) : T(0);
        mask[i] = keep ? 1 : 0;
      }
      store(out[0], dt, y);
    });
  });
}

// dx = mask ? dy / (1-p) : 0
std::unique_ptr<Kernel> dropout_grad(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const Dims shape = c.in(0).dims;
  const double p = c.float_attr("p");
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = numel(shape);
      std::vector<T> dx = load<T>(in[0], dt, n);
      const auto* mask = static_cast<const uint8_t*>(in[1]);
      for (int64_t i = 0; i < n; ++i) dx[size_t(i)] = mask[i] != 0 ? T(dx[size_t(i)] / T(1.0 - p)) : T(0);
      store(out[0], dt, dx);
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("dropout", dropout);
  r.add("dropout_grad", dropout_grad);
});

}  // namespace

}  // namespace tandem::reference
