// Comparison helpers for the reference tests.
#ifndef TANDEM_TESTS_REFERENCE_EXPECT_HPP
#define TANDEM_TESTS_REFERENCE_EXPECT_HPP

#include <gtest/gtest.h>

#include <vector>

#include "harness.hpp"

namespace ref_test {

// Hand-computed values are written to ~7 significant digits.
constexpr double kTol = 1e-5;

template <class S>
void expect_near(const Tensor& t, const std::vector<double>& expected, double tol = kTol) {
  const std::vector<S> got = t.as<S>();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(double(got[i]), expected[i], tol) << "element " << i;
}
inline void expect_f32(const Tensor& t, const std::vector<double>& e, double tol = kTol) {
  expect_near<float>(t, e, tol);
}

#define EXPECT_RUN_OK(result) ASSERT_EQ((result).status, TDM_OK) << (result).message

}  // namespace ref_test

#endif  // TANDEM_TESTS_REFERENCE_EXPECT_HPP
