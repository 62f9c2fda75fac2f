// The parameter gradients of layer_norm_grad (dgamma, dbeta) and
// rms_norm_grad (dgamma): summed with dx in one pass over chunks of rows,
// then the chunks' partial sums in order (ops/row_chunk_sums.hpp). The
// chunks depend on the row count only, so the gradients must be the same
// bits on any number of threads; the conformance kit checks the values
// against the reference backend, this checks them against double sums of
// the kernel's own inputs, over enough rows for many chunks.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "plugin_fixture.hpp"

using namespace onednn_test;

namespace {

tc::HostTensor input(tdm_dtype dt, const std::vector<int64_t>& dims, int seed) {
  return tc::HostTensor::from_values(dt, dims, values(dims, seed).to_f64());
}

// A normalisation's gradient of dy at x [rows, d], its statistics from the
// plugin's forward: the op, its inputs and its outputs' specs.
struct Grad {
  std::string op;
  std::vector<tc::HostTensor> inputs;
  std::vector<tc::TensorShape> outputs;
  tc::RunResult run(int threads) const {
    ThreadCount use(threads);
    return tc::run_op(*loaded().kit, op, {}, inputs, outputs);
  }
};

// dy, x, gamma, then the forward's statistics (from output 1 on).
Grad make_grad(const std::string& norm, tdm_dtype dt, int64_t rows, int64_t d) {
  const bool layer = norm == "layer_norm";
  const tc::HostTensor dy = input(dt, {rows, d}, 1), x = input(dt, {rows, d}, 2), gamma = input(dt, {d}, 3);
  std::vector<tc::HostTensor> fwd_in{x, gamma};
  std::vector<tc::TensorShape> fwd_out{{dt, {rows, d}}, {TDM_F32, {rows}}};
  if (layer) fwd_in.push_back(input(dt, {d}, 4)), fwd_out.push_back({TDM_F32, {rows}});
  const tc::RunResult fwd = tc::run_op(*loaded().kit, norm, {}, fwd_in, fwd_out);
  EXPECT_TRUE(fwd.outcome.ok()) << fwd.outcome.message;
  Grad g{norm + "_grad", {dy, x, gamma}, {{dt, {rows, d}}, {dt, {d}}}};
  if (layer) g.outputs.push_back({dt, {d}});
  if (fwd.outcome.ok()) g.inputs.insert(g.inputs.end(), fwd.outputs.begin() + 1, fwd.outputs.end());
  return g;
}

// term(r, i): row r's term of the parameter gradient in output `out`.
using Term = std::function<double(int64_t r, int64_t i)>;

// Runs the gradient on 1, 2 and 3 threads: the same bits on each, and the
// parameter gradients (output 1 on, one Term each) within f32 (or bf16)
// rounding of double sums.
void expect_deterministic_and_accurate(const Grad& g, tdm_dtype dt, int64_t rows, int64_t d,
                                       const std::vector<Term>& terms) {
  const tc::RunResult one = g.run(1);
  ASSERT_TRUE(one.outcome.ok()) << one.outcome.message;
  for (int threads : {2, 3}) {
    const tc::RunResult more = g.run(threads);
    ASSERT_TRUE(more.outcome.ok()) << more.outcome.message;
    for (size_t i = 0; i < g.outputs.size(); ++i)
      EXPECT_TRUE(one.outputs[i].bitwise_equal(more.outputs[i]))
          << "output " << i << ", " << threads << " threads";
  }
  // f32 sums of `rows` terms of magnitude ~1 against double: a few 1e-4
  // relative at most for f32 results; bf16 results round to 8 bits.
  const double tolerance = dt == TDM_F32 ? 2e-4 : 1e-2;
  for (size_t out = 0; out < terms.size(); ++out) {
    const std::vector<double> got = one.outputs[out + 1].to_f64();
    for (int64_t i = 0; i < d; ++i) {
      double sum = 0, scale = 0;
      for (int64_t r = 0; r < rows; ++r) sum += terms[out](r, i), scale += std::fabs(terms[out](r, i));
      EXPECT_NEAR(got[size_t(i)], sum, tolerance * scale) << "output " << out + 1 << ", column " << i;
    }
  }
}

// 1000 rows: 16 chunks of 64; 20000: 254 of 79. d = 200 is no multiple of
// a vector.
constexpr int64_t kD = 200;
const int64_t kRows[] = {1000, 20000};

std::string trace(tdm_dtype dt, int64_t rows) {
  return std::string(dt == TDM_F32 ? "f32" : "bf16") + ", rows " + std::to_string(rows);
}

}  // namespace

TEST(OnednnNormParamSums, LayerNormGradientsAreTheSameBitsOnAnyThreadCountAndMatchDoubleSums) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  for (tdm_dtype dt : {TDM_F32, TDM_BF16})
    for (int64_t rows : kRows) {
      SCOPED_TRACE(trace(dt, rows));
      const Grad g = make_grad("layer_norm", dt, rows, kD);
      ASSERT_EQ(g.inputs.size(), 5u) << "the forward failed";
      const std::vector<double> dy = g.inputs[0].to_f64(), x = g.inputs[1].to_f64(),
                                mean = g.inputs[3].to_f64(), rstd = g.inputs[4].to_f64();
      const auto at = [](int64_t r, int64_t i) { return size_t(r * kD + i); };
      expect_deterministic_and_accurate(g, dt, rows, kD,
                                        {[&](int64_t r, int64_t i) {
                                           return dy[at(r, i)] * (x[at(r, i)] - mean[size_t(r)]) *
                                                  rstd[size_t(r)];
                                         },
                                         [&](int64_t r, int64_t i) { return dy[at(r, i)]; }});
    }
}

TEST(OnednnNormParamSums, RmsNormGradientIsTheSameBitsOnAnyThreadCountAndMatchesDoubleSums) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  for (tdm_dtype dt : {TDM_F32, TDM_BF16})
    for (int64_t rows : kRows) {
      SCOPED_TRACE(trace(dt, rows));
      const Grad g = make_grad("rms_norm", dt, rows, kD);
      ASSERT_EQ(g.inputs.size(), 4u) << "the forward failed";
      const std::vector<double> dy = g.inputs[0].to_f64(), x = g.inputs[1].to_f64(),
                                rstd = g.inputs[3].to_f64();
      const auto at = [](int64_t r, int64_t i) { return size_t(r * kD + i); };
      expect_deterministic_and_accurate(g, dt, rows, kD, {[&](int64_t r, int64_t i) {
                                          return dy[at(r, i)] * x[at(r, i)] * rstd[size_t(r)];
                                        }});
    }
}
