// The own GEMM (plugins/onednn/ops/sgemm.hpp) through the ops that use it:
// linear (bias, relu), linear_grad_input, linear_grad_weight (dbias) and
// matmul with either operand transposed. Shapes cross every blocking edge:
// rows not a multiple of the 6-row block, columns not a multiple of 16,
// depths beyond the 256-deep k block, a width beyond the 4080-column block
// (in linear's product and in the weight gradient's), a weight gradient
// deep enough to be summed in two halves.
// The own GEMM takes products of at least 2^25 multiply-adds; this file
// sets TANDEM_ONEDNN_OWN_SGEMM=all before the plugin loads so that small
// shapes, which reach every edge faster, run on it too.
// Each product is checked against a double-precision sum, and on the own
// GEMM must be the same bits on 1, 2, 3 and 4 threads. Where the own GEMM
// does not serve (an AVX-512 CPU without ONEDNN_MAX_CPU_ISA=AVX2, or a
// dimension below its block) the values are checked on oneDNN's products,
// and the kernel must say it is oneDNN's.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "plugin_fixture.hpp"

using namespace onednn_test;

namespace {

// Before main, so before any test loads the plugin (which reads it once).
[[maybe_unused]] const int own_gemm_for_every_size = setenv("TANDEM_ONEDNN_OWN_SGEMM", "all", 1);

// One op on 1..4 threads, whose product is rows x cols of depth `depth`.
// The own GEMM takes it when the CPU is an AVX2 one and no dimension is
// below its register block's (6 rows, 16 columns, 8 deep: sgemm::serves);
// then the outputs of every count must be the same bits (oneDNN's sgemm
// splits the depth among threads, so its last bits may move).
tc::RunResult run_on_every_thread_count(const std::string& op, const tc::Attrs& attrs,
                                        const std::vector<tc::HostTensor>& in,
                                        const std::vector<tc::TensorShape>& out, int64_t rows, int64_t cols,
                                        int64_t depth, const tc::RunOptions& options = {}) {
  const bool own = effective_isa_is_avx2() && rows >= 6 && cols >= 16 && depth >= 8;
  tc::RunResult first;
  for (int threads = 1; threads <= 4; ++threads) {
    ThreadCount use(threads);
    tc::RunResult r = tc::run_op(*loaded().kit, op, attrs, in, out, options);
    EXPECT_TRUE(r.outcome.ok()) << op << ": " << r.outcome.message;
    if (!r.outcome.ok()) return r;
    EXPECT_EQ(r.implementation.find("sgemm:avx2") != std::string::npos, own)
        << op << " " << rows << "x" << cols << "x" << depth << " ran on " << r.implementation;
    if (threads == 1) {
      first = std::move(r);
      continue;
    }
    for (size_t i = 0; own && i < r.outputs.size(); ++i)
      EXPECT_TRUE(r.outputs[i].bitwise_equal(first.outputs[i]))
          << op << " output " << i << " differs between 1 and " << threads << " threads";
  }
  return first;
}

// |got - want| within f32 rounding of a k-term sum of products of values
// below 1 in magnitude.
void expect_product(const std::vector<double>& got, const std::vector<double>& want, int64_t k,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double tol = 4e-7 * double(k) + 1e-6;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << what << " element " << i;
}

struct Shape {
  int64_t m, n, k;
};
const Shape kShapes[] = {{6, 16, 8},    {7, 17, 9},      {13, 33, 31},    {64, 48, 256},
                         {65, 47, 257}, {130, 100, 600}, {256, 256, 300}, {6, 4100, 8},
                         {300, 20, 70}, {16, 16, 4100},  {2100, 20, 40}};

// The own GEMM sums a weight gradient at least 2048 deep, of at most 2^21
// outputs, as two halves of the depth, the first ceil(depth / 2 / 256) · 256
// deep (sgemm.cpp, halves_depth): the depth where its dbias restarts from
// 0, or 0 when it does not.
int64_t second_half_start(int64_t depth, int64_t outputs) {
  return depth >= 2048 && outputs <= (int64_t(1) << 21) ? (depth / 2 + 255) / 256 * 256 : 0;
}

}  // namespace

TEST(OnednnSgemm, LinearWithBiasAndReluIsTheProductOnEveryThreadCount) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  for (const Shape& s : kShapes)
    for (const char* act : {"none", "relu"}) {
      const tc::HostTensor x = values({s.m, s.k}, 1), w = values({s.n, s.k}, 2), b = values({s.n}, 3);
      tc::Attrs attrs;
      attrs.string("activation", act);
      const tc::RunResult r =
          run_on_every_thread_count("linear", attrs, {x, w, b}, {{TDM_F32, {s.m, s.n}}}, s.m, s.n, s.k);
      if (!r.outcome.ok()) return;
      const std::vector<double> xv = x.to_f64(), wv = w.to_f64(), bv = b.to_f64();
      std::vector<double> want(size_t(s.m * s.n));
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double sum = bv[size_t(j)];
          for (int64_t q = 0; q < s.k; ++q) sum += xv[size_t(i * s.k + q)] * wv[size_t(j * s.k + q)];
          want[size_t(i * s.n + j)] = std::string(act) == "relu" ? std::max(sum, 0.0) : sum;
        }
      expect_product(r.outputs[0].to_f64(), want, s.k,
                     "linear " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
                         " " + act);
    }
}

TEST(OnednnSgemm, LinearGradientsAreTheProductsOnEveryThreadCount) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  for (const Shape& s : kShapes) {
    // y[m, n] = x[m, k]·wᵀ: dx = dy·w [m, k], dw = dyᵀ·x [n, k], db = column sums of dy.
    const tc::HostTensor dy = values({s.m, s.n}, 4), w = values({s.n, s.k}, 5), x = values({s.m, s.k}, 6);
    const std::string name = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
    const std::vector<double> dyv = dy.to_f64(), wv = w.to_f64(), xv = x.to_f64();

    const tc::RunResult dx =
        run_on_every_thread_count("linear_grad_input", {}, {dy, w}, {{TDM_F32, {s.m, s.k}}}, s.m, s.k, s.n);
    if (!dx.outcome.ok()) return;
    std::vector<double> want(size_t(s.m * s.k));
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t q = 0; q < s.k; ++q) {
        double sum = 0;
        for (int64_t j = 0; j < s.n; ++j) sum += dyv[size_t(i * s.n + j)] * wv[size_t(j * s.k + q)];
        want[size_t(i * s.k + q)] = sum;
      }
    expect_product(dx.outputs[0].to_f64(), want, s.n, "linear_grad_input " + name);

    const tc::RunResult dw = run_on_every_thread_count(
        "linear_grad_weight", {}, {dy, x}, {{TDM_F32, {s.n, s.k}}, {TDM_F32, {s.n}}}, s.n, s.k, s.m);
    if (!dw.outcome.ok()) return;
    want.assign(size_t(s.n * s.k), 0.0);
    std::vector<double> want_db(size_t(s.n), 0.0);
    for (int64_t j = 0; j < s.n; ++j) {
      for (int64_t q = 0; q < s.k; ++q) {
        double sum = 0;
        for (int64_t i = 0; i < s.m; ++i) sum += dyv[size_t(i * s.n + j)] * xv[size_t(i * s.k + q)];
        want[size_t(j * s.k + q)] = sum;
      }
      for (int64_t i = 0; i < s.m; ++i) want_db[size_t(j)] += dyv[size_t(i * s.n + j)];
    }
    expect_product(dw.outputs[0].to_f64(), want, s.m, "linear_grad_weight " + name);
    expect_product(dw.outputs[1].to_f64(), want_db, s.m, "linear_grad_weight dbias " + name);
    // Either path sums dbias in f32 down the rows in order from 0 (the own
    // GEMM while it packs dy, else a column sum): this loop's bits. The own
    // GEMM's halves each start from 0 and are then added.
    const bool own = dw.implementation.find("sgemm:avx2") != std::string::npos;
    const int64_t restart = own ? second_half_start(s.m, s.n * s.k) : 0;
    std::vector<float> in_order(size_t(s.n), 0.f), second(size_t(s.n), 0.f);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j)
        (restart > 0 && i >= restart ? second : in_order)[size_t(j)] += float(dyv[size_t(i * s.n + j)]);
    for (int64_t j = 0; j < s.n; ++j) in_order[size_t(j)] += second[size_t(j)];
    const std::vector<double> db = dw.outputs[1].to_f64();
    for (int64_t j = 0; j < s.n; ++j)
      ASSERT_EQ(db[size_t(j)], double(in_order[size_t(j)])) << "dbias " << name << " column " << j;
  }
}

// dx = dy·w + addend (the host's gradient sum of an input read twice): the
// first k block starts from the addend, in dx's own buffer or over the
// addend's (in place), with the same bits on every thread count.
TEST(OnednnSgemm, LinearGradInputAddsItsAddendOnEveryThreadCount) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  for (const Shape& s : {Shape{7, 17, 9}, Shape{65, 47, 257}, Shape{130, 100, 600}})
    for (int in_place = 0; in_place < 2; ++in_place) {
      const tc::HostTensor dy = values({s.m, s.n}, 7), w = values({s.n, s.k}, 8),
                           addend = values({s.m, s.k}, 9);
      const std::string name = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
                               (in_place ? " in place" : "");
      tc::RunOptions options;
      if (in_place) options.in_place = {{0, 2}};
      const tc::RunResult dx = run_on_every_thread_count("linear_grad_input", {}, {dy, w, addend},
                                                         {{TDM_F32, {s.m, s.k}}}, s.m, s.k, s.n, options);
      if (!dx.outcome.ok()) return;
      const std::vector<double> dyv = dy.to_f64(), wv = w.to_f64(), av = addend.to_f64();
      std::vector<double> want(size_t(s.m * s.k));
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t q = 0; q < s.k; ++q) {
          double sum = av[size_t(i * s.k + q)];
          for (int64_t j = 0; j < s.n; ++j) sum += dyv[size_t(i * s.n + j)] * wv[size_t(j * s.k + q)];
          want[size_t(i * s.k + q)] = sum;
        }
      expect_product(dx.outputs[0].to_f64(), want, s.n + 1, "linear_grad_input + addend " + name);
    }
}

// A weight gradient deep enough to halve but with more than 2^21 outputs
// (1040 x 2048) is summed in one pass: its dbias has the in-order bits, and
// sampled entries of dw match double sums (all of them would take seconds).
TEST(OnednnSgemm, AWeightGradientWithTooManyOutputsIsNotHalved) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  const int64_t tokens = 2048, out = 1040, in = 2048;
  ASSERT_EQ(second_half_start(tokens, out * in), 0);
  const tc::HostTensor dy = values({tokens, out}, 9), x = values({tokens, in}, 10);
  const tc::RunResult dw = run_on_every_thread_count(
      "linear_grad_weight", {}, {dy, x}, {{TDM_F32, {out, in}}, {TDM_F32, {out}}}, out, in, tokens);
  if (!dw.outcome.ok()) return;
  const std::vector<double> dyv = dy.to_f64(), xv = x.to_f64(), got = dw.outputs[0].to_f64();
  std::vector<float> in_order(size_t(out), 0.f);
  for (int64_t i = 0; i < tokens; ++i)
    for (int64_t j = 0; j < out; ++j) in_order[size_t(j)] += float(dyv[size_t(i * out + j)]);
  const std::vector<double> db = dw.outputs[1].to_f64();
  for (int64_t j = 0; j < out; ++j)
    ASSERT_EQ(db[size_t(j)], double(in_order[size_t(j)])) << "dbias column " << j;
  for (int64_t s = 0; s < 64; ++s) {
    const int64_t j = (s * 677) % out, q = (s * 1559 + 3) % in;
    double want = 0;
    for (int64_t i = 0; i < tokens; ++i) want += dyv[size_t(i * out + j)] * xv[size_t(i * in + q)];
    ASSERT_NEAR(got[size_t(j * in + q)], want, 4e-7 * double(tokens) + 1e-6)
        << "dw (" << j << ", " << q << ")";
  }
}

TEST(OnednnSgemm, MatmulWithEitherOperandTransposed) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  const Shape s{65, 47, 300};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const tc::HostTensor a =
          values(ta ? std::vector<int64_t>{s.k, s.m} : std::vector<int64_t>{s.m, s.k}, 7);
      const tc::HostTensor b =
          values(tb ? std::vector<int64_t>{s.n, s.k} : std::vector<int64_t>{s.k, s.n}, 8);
      tc::Attrs attrs;
      attrs.integer("transpose_a", ta).integer("transpose_b", tb);
      const tc::RunResult r =
          run_on_every_thread_count("matmul", attrs, {a, b}, {{TDM_F32, {s.m, s.n}}}, s.m, s.n, s.k);
      if (!r.outcome.ok()) return;
      const std::vector<double> av = a.to_f64(), bv = b.to_f64();
      std::vector<double> want(size_t(s.m * s.n));
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double sum = 0;
          for (int64_t q = 0; q < s.k; ++q)
            sum += av[size_t(ta ? q * s.m + i : i * s.k + q)] * bv[size_t(tb ? j * s.k + q : q * s.n + j)];
          want[size_t(i * s.n + j)] = sum;
        }
      expect_product(r.outputs[0].to_f64(), want, s.k,
                     "matmul transpose_a=" + std::to_string(ta) + " transpose_b=" + std::to_string(tb));
    }
}
