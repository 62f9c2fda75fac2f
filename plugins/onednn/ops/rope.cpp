// oneDNN backend — rotary position embedding and its gradient: own code.
// The angles (the SDK's frequencies, llama3 scaling included) are formed
// in double (sdk/ops.md: in f32, position × frequency alone is off by
// ~position·6e-8) into a cos/sin table of [T, D/2] that the
// kernel keeps and rebuilds only when position_offset changes, so a
// training step pays for the trigonometry once per kernel.
#include <cmath>
#include <mutex>

#include "common.hpp"
#include "tandem/rope_frequency.hpp"

namespace tandem::onednn {

namespace {

struct Table {
  std::mutex lock;  // a kernel may be launched from several streams in turn
  int64_t offset = -1;
  std::vector<float> cos_sin;  // [T, D/2, 2]
};

void fill_table(Table& tab, int64_t offset, int64_t T, int64_t half, const RopeFrequency& frequency,
                double direction) {
  tab.cos_sin.resize(size_t(T * half * 2));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double theta = direction * double(offset + t) * frequency(i, half);
      tab.cos_sin[size_t((t * half + i) * 2)] = float(std::cos(theta));
      tab.cos_sin[size_t((t * half + i) * 2 + 1)] = float(std::sin(theta));
    }
  tab.offset = offset;
}

std::unique_ptr<Kernel> rotation(const OpView& op, double direction) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims shape = c.in(0).dims;
  const int64_t D = shape.back(), T = shape[shape.size() - 2], half = D / 2;
  const bool has_offset = c.has_input(1);
  const RopeFrequency frequency = rope_frequency_of(c);
  const int64_t rows = D ? numel(shape) / D : 0;
  auto table = std::make_shared<Table>();
  return with_f32_bf16(dt, [&](auto t) {
    using E = decltype(t);
    return make_fn(c, [=](void* const* in, void* const* out, void*) {
      const int64_t offset = has_offset ? *static_cast<const int64_t*>(in[1]) : 0;
      std::lock_guard<std::mutex> hold(table->lock);
      if (table->offset != offset || table->cos_sin.empty())
        fill_table(*table, offset, T, half, frequency, direction);
      const float* cs = table->cos_sin.data();
      const E* x = static_cast<const E*>(in[0]);
      E* y = static_cast<E*>(out[0]);
#pragma omp parallel for schedule(static) if (rows * D > kParallelGrain)
      for (int64_t row = 0; row < rows; ++row) {
        const int64_t b = row * D;
        const float* r = cs + (row % T) * half * 2;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const float lo = ld(x, b + i), hi = ld(x, b + i + half);
          st(y, b + i, lo * r[2 * i] - hi * r[2 * i + 1]);
          st(y, b + i + half, hi * r[2 * i] + lo * r[2 * i + 1]);
        }
      }
    });
  });
}

std::unique_ptr<Kernel> rope(const OpView& op, size_t&) {
  return rotation(op, 1.0);
}
std::unique_ptr<Kernel> rope_grad(const OpView& op, size_t&) {
  return rotation(op, -1.0);
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("rope", rope);
  r.add("rope_grad", rope_grad);
});

}  // namespace

}  // namespace tandem::onednn
