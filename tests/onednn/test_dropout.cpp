// The dropout op on a tensor of many mask chunks: the forward draws its
// mask a chunk at a time, threaded, through the per-level loops
// (ops/dropout.cpp; ONEDNN_MAX_CPU_ISA=AVX2 runs the AVX2 copy). The
// conformance kit's cases fit in one chunk; this checks 100003 elements
// (25 chunks and a tail) element by element against the SDK's mask, with
// a seed offset, on 1, 2 and 3 threads, f32 and bf16, and the gradient
// through the mask it returned.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "plugin_fixture.hpp"
#include "tandem/dropout_mask.hpp"

using namespace onednn_test;

namespace {

constexpr int64_t kElements = 100003;

// v[i] / (1 − p) as the catalog computes a kept element: in f32, then
// rounded to dt.
std::vector<double> divided(tdm_dtype dt, const std::vector<double>& v, double p) {
  std::vector<double> w(v.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = double(float(v[i]) / float(1.0 - p));
  return tc::HostTensor::from_values(dt, {int64_t(w.size())}, w).to_f64();
}

TEST(OnednnDropout, EveryChunkKeepsWhatTheCatalogsMaskKeeps) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  const uint64_t seed = 0x1234, offset = 77;
  const std::vector<double> xv = values({kElements}, 1).to_f64();
  for (tdm_dtype dt : {TDM_F32, TDM_BF16})
    for (double p : {0.1, 0.5, 0.9}) {
      const std::string what = std::string(dt == TDM_F32 ? "f32" : "bf16") + " p " + std::to_string(p);
      const tc::HostTensor x = tc::HostTensor::from_values(dt, {kElements}, xv);
      const std::vector<double> xr = x.to_f64();  // as rounded to dt
      tc::Attrs attrs;
      attrs.number("p", p).integer("seed", int64_t(seed));
      const std::vector<tc::HostTensor> in{x, tc::HostTensor::from_values(TDM_S64, {}, {double(offset)})};
      tc::RunResult first;
      for (int threads : {1, 2, 3}) {
        ThreadCount use(threads);
        tc::RunResult r =
            tc::run_op(*loaded().kit, "dropout", attrs, in, {{dt, {kElements}}, {TDM_U8, {kElements}}});
        ASSERT_TRUE(r.outcome.ok()) << what << ": " << r.outcome.message;
        if (threads == 1) {
          first = std::move(r);
          continue;
        }
        for (size_t o = 0; o < 2; ++o)
          EXPECT_TRUE(r.outputs[o].bitwise_equal(first.outputs[o]))
              << what << " output " << o << ", " << threads << " threads";
      }
      const std::vector<double> y = first.outputs[0].to_f64(), mask = first.outputs[1].to_f64();
      const std::vector<double> kept = divided(dt, xr, p);
      int64_t kept_count = 0;
      for (int64_t i = 0; i < kElements; ++i) {
        const bool keep = tandem::dropout_uniform(seed + offset, uint64_t(i)) >= p;
        kept_count += keep;
        ASSERT_EQ(mask[size_t(i)], keep ? 1.0 : 0.0) << what << " mask element " << i;
        ASSERT_EQ(y[size_t(i)], keep ? kept[size_t(i)] : 0.0) << what << " element " << i;
      }
      EXPECT_NEAR(double(kept_count) / double(kElements), 1 - p, 0.01) << what;

      const tc::HostTensor dy = tc::HostTensor::from_values(dt, {kElements}, values({kElements}, 2).to_f64());
      tc::Attrs grad_attrs;
      grad_attrs.number("p", p);
      const tc::RunResult g =
          tc::run_op(*loaded().kit, "dropout_grad", grad_attrs, {dy, first.outputs[1]}, {{dt, {kElements}}});
      ASSERT_TRUE(g.outcome.ok()) << what << ": " << g.outcome.message;
      const std::vector<double> dx = g.outputs[0].to_f64(), dy_kept = divided(dt, dy.to_f64(), p);
      for (int64_t i = 0; i < kElements; ++i)
        ASSERT_EQ(dx[size_t(i)], mask[size_t(i)] != 0 ? dy_kept[size_t(i)] : 0.0)
            << what << " gradient element " << i;
    }
}

}  // namespace
