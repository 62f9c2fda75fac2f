// layer_norm_grad's parameter gradients (ops/layer_norm.cpp): summed with dx
// in one pass over chunks of rows, then the chunks' partial sums in order.
// The chunks depend on the row count only, so dgamma and dbeta must be the
// same bits on any number of threads; the conformance kit checks the values
// against the reference backend, this checks them against double sums of
// the kernel's own inputs, over enough rows for many chunks.
#include <gtest/gtest.h>

#include <cmath>

#include "plugin_fixture.hpp"

using namespace onednn_test;

namespace {

// The layer norm's gradient of dy at x [rows, d] (statistics from the
// plugin's forward), on `threads` threads.
struct Grad {
  tc::HostTensor dy, x, gamma, mean, rstd;
  tc::RunResult run(int threads) const {
    ThreadCount use(threads);
    const int64_t rows = x.dims()[0], d = x.dims()[1];
    return tc::run_op(*loaded().kit, "layer_norm_grad", {}, {dy, x, gamma, mean, rstd},
                      {{x.dtype(), {rows, d}}, {x.dtype(), {d}}, {x.dtype(), {d}}});
  }
};

Grad make_grad(tdm_dtype dt, int64_t rows, int64_t d) {
  const auto in = [&](const std::vector<int64_t>& dims, int seed) {
    return tc::HostTensor::from_values(dt, dims, values(dims, seed).to_f64());
  };
  Grad g{in({rows, d}, 1), in({rows, d}, 2), in({d}, 3), {}, {}};
  const tc::RunResult fwd = tc::run_op(*loaded().kit, "layer_norm", {}, {g.x, g.gamma, in({d}, 4)},
                                       {{dt, {rows, d}}, {TDM_F32, {rows}}, {TDM_F32, {rows}}});
  EXPECT_TRUE(fwd.outcome.ok()) << fwd.outcome.message;
  if (fwd.outcome.ok()) g.mean = fwd.outputs[1], g.rstd = fwd.outputs[2];
  return g;
}

}  // namespace

TEST(OnednnLayerNorm, ParameterGradientsAreTheSameBitsOnAnyThreadCountAndMatchDoubleSums) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  // 1000 rows: 16 chunks of 64; 20000: 254 of 79. d = 200 is no multiple
  // of a vector.
  for (tdm_dtype dt : {TDM_F32, TDM_BF16})
    for (int64_t rows : {1000, 20000}) {
      SCOPED_TRACE(std::string(dt == TDM_F32 ? "f32" : "bf16") + ", rows " + std::to_string(rows));
      const int64_t d = 200;
      const Grad g = make_grad(dt, rows, d);
      ASSERT_EQ(g.mean.dims().size(), 1u);
      const tc::RunResult one = g.run(1);
      ASSERT_TRUE(one.outcome.ok()) << one.outcome.message;
      for (int threads : {2, 3}) {
        const tc::RunResult more = g.run(threads);
        ASSERT_TRUE(more.outcome.ok()) << more.outcome.message;
        for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(one.outputs[i].bitwise_equal(more.outputs[i])) << threads;
      }
      const std::vector<double> dy = g.dy.to_f64(), x = g.x.to_f64(), mean = g.mean.to_f64(),
                                rstd = g.rstd.to_f64(), dgamma = one.outputs[1].to_f64(),
                                dbeta = one.outputs[2].to_f64();
      // f32 sums of `rows` terms of magnitude ~1 against double: a few 1e-4
      // relative at most for f32 results; bf16 results round to 8 bits.
      const double tolerance = dt == TDM_F32 ? 2e-4 : 1e-2;
      for (int64_t i = 0; i < d; ++i) {
        double sg = 0, sb = 0, scale = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const double term =
              dy[size_t(r * d + i)] * (x[size_t(r * d + i)] - mean[size_t(r)]) * rstd[size_t(r)];
          sg += term, sb += dy[size_t(r * d + i)],
              scale += std::fabs(term) + std::fabs(dy[size_t(r * d + i)]);
        }
        EXPECT_NEAR(dgamma[size_t(i)], sg, tolerance * scale / 2) << "dgamma " << i;
        EXPECT_NEAR(dbeta[size_t(i)], sb, tolerance * scale / 2) << "dbeta " << i;
      }
    }
}
