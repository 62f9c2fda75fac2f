// Products of at least 2^25 multiply-adds whose second operand is read as
// stored ([K, N] row-major): a linear's dx = dy·w (with and without the
// addend the host sums into it), its dw = dyᵀ·x with dbias, and a 2-D
// matmul with a transposed first operand. On an AVX-512 CPU they run on
// oneDNN's sgemm rather than its brgemm matmul (ops/matmul_primitive.cpp:
// jit_sgemm_pays); under an AVX2 limit on the own GEMM (this binary sets
// TANDEM_ONEDNN_OWN_SGEMM=all, test_sgemm.cpp). Either way the kernel must
// say which, and the outputs must be the exact products: every operand is a
// multiple of 1/8 or 1/4 small enough that each sum is exact in f32,
// whatever its order.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plugin_fixture.hpp"

using namespace onednn_test;

namespace {

// The routine a wide product must run on here, or empty where neither
// applies (a CPU below AVX2 + FMA).
std::string expected_routine() {
  if (effective_isa_is_avx2()) return "sgemm:avx2";
  return device_features().find("avx512_core") != std::string::npos ? "gemm:jit" : "";
}

std::vector<double> eighths(int64_t count, int period) {
  std::vector<double> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(int(i % size_t(period)) - period / 2) / 8;
  return v;
}

std::vector<double> quarters(int64_t count, int period) {
  std::vector<double> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(int((i * 7) % size_t(period)) - period / 2) / 4;
  return v;
}

void expect_ran_on_routine(const tc::RunResult& r, const std::string& op) {
  ASSERT_TRUE(r.outcome.ok()) << op << ": " << r.outcome.message;
  const std::string routine = expected_routine();
  if (!routine.empty()) {
    EXPECT_NE(r.implementation.find(routine), std::string::npos) << op << ": " << r.implementation;
  }
}

// 256 x 1024 x 128 = 2^25 multiply-adds.
constexpr int64_t kRows = 256, kOut = 128, kIn = 1024;

TEST(OnednnWideProducts, GradInputWithAndWithoutAddendIsTheProduct) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  const std::vector<double> dy = eighths(kRows * kOut, 13), w = quarters(kOut * kIn, 11),
                            addend = eighths(kRows * kIn, 7);
  for (const bool with_addend : {false, true}) {
    std::vector<tc::HostTensor> in{tc::HostTensor::from_values(TDM_F32, {kRows, kOut}, dy),
                                   tc::HostTensor::from_values(TDM_F32, {kOut, kIn}, w)};
    if (with_addend) in.push_back(tc::HostTensor::from_values(TDM_F32, {kRows, kIn}, addend));
    const tc::RunResult r = tc::run_op(*loaded().kit, "linear_grad_input", {}, in, {{TDM_F32, {kRows, kIn}}});
    ASSERT_NO_FATAL_FAILURE(expect_ran_on_routine(r, "linear_grad_input"));
    const std::vector<double> dx = r.outputs[0].to_f64();
    for (int64_t a = 0; a < kRows; ++a)
      for (int64_t b = 0; b < kIn; ++b) {
        double want = with_addend ? addend[size_t(a * kIn + b)] : 0;
        for (int64_t k = 0; k < kOut; ++k) want += dy[size_t(a * kOut + k)] * w[size_t(k * kIn + b)];
        ASSERT_EQ(dx[size_t(a * kIn + b)], want)
            << "dx[" << a << ", " << b << "], addend " << with_addend << ", " << r.implementation;
      }
  }
}

TEST(OnednnWideProducts, GradWeightAndItsBiasAreTheSums) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  const std::vector<double> dy = eighths(kRows * kOut, 13), x = quarters(kRows * kIn, 11);
  tc::Attrs attrs;
  attrs.integer("has_bias", 1);
  const tc::RunResult r = tc::run_op(*loaded().kit, "linear_grad_weight", attrs,
                                     {tc::HostTensor::from_values(TDM_F32, {kRows, kOut}, dy),
                                      tc::HostTensor::from_values(TDM_F32, {kRows, kIn}, x)},
                                     {{TDM_F32, {kOut, kIn}}, {TDM_F32, {kOut}}});
  ASSERT_NO_FATAL_FAILURE(expect_ran_on_routine(r, "linear_grad_weight"));
  const std::vector<double> dw = r.outputs[0].to_f64(), dbias = r.outputs[1].to_f64();
  for (int64_t o = 0; o < kOut; ++o) {
    double bias_sum = 0;
    for (int64_t n = 0; n < kRows; ++n) bias_sum += dy[size_t(n * kOut + o)];
    ASSERT_EQ(dbias[size_t(o)], bias_sum) << "dbias[" << o << "]";
    for (int64_t i = 0; i < kIn; ++i) {
      double want = 0;
      for (int64_t n = 0; n < kRows; ++n) want += dy[size_t(n * kOut + o)] * x[size_t(n * kIn + i)];
      ASSERT_EQ(dw[size_t(o * kIn + i)], want) << "dw[" << o << ", " << i << "] " << r.implementation;
    }
  }
}

TEST(OnednnWideProducts, MatmulWithTransposedFirstOperandIsTheProduct) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  // y[m, n] = aᵀ·b with a stored [k, m], b stored [k, n].
  const int64_t m = 128, n = 1024, k = 256;
  const std::vector<double> a = eighths(k * m, 9), b = quarters(k * n, 13);
  tc::Attrs attrs;
  attrs.integer("transpose_a", 1);
  const tc::RunResult r = tc::run_op(
      *loaded().kit, "matmul", attrs,
      {tc::HostTensor::from_values(TDM_F32, {k, m}, a), tc::HostTensor::from_values(TDM_F32, {k, n}, b)},
      {{TDM_F32, {m, n}}});
  ASSERT_NO_FATAL_FAILURE(expect_ran_on_routine(r, "matmul"));
  const std::vector<double> y = r.outputs[0].to_f64();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t q = 0; q < k; ++q) want += a[size_t(q * m + i)] * b[size_t(q * n + j)];
      ASSERT_EQ(y[size_t(i * n + j)], want) << "y[" << i << ", " << j << "] " << r.implementation;
    }
}

}  // namespace
