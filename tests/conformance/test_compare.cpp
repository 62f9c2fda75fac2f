// The comparison and the tolerance table: planted errors are caught, NaN
// never passes, the worst element is the one reported.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tandem/conformance/compare.hpp"

namespace tc = tandem::conformance;
using tc::HostTensor;

namespace {
HostTensor ramp(tdm_dtype dt, int64_t n) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(0.25 * double(i) - 3);
  return HostTensor::from_values(dt, {n}, v);
}
}  // namespace

TEST(Compare, IdenticalPasses) {
  const HostTensor a = ramp(TDM_F32, 37);
  const tc::Comparison c = tc::compare(a, a, 0);
  EXPECT_TRUE(c.pass);
  EXPECT_EQ(c.max_err, 0);
}

TEST(Compare, PlantedErrorIsCaughtAndLocated) {
  const HostTensor expected = ramp(TDM_F32, 37);
  HostTensor got = expected;
  got.set(23, got.get(23) + 1e-3);
  got.set(5, got.get(5) + 1e-7);  // smaller: not the worst
  const tc::Comparison c = tc::compare(got, expected, 1e-5);
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.worst_index, 23);
  EXPECT_NEAR(c.max_err, 1e-3 / std::fabs(expected.get(23)), 1e-6);
  EXPECT_DOUBLE_EQ(c.expected, expected.get(23));
  EXPECT_NE(c.message.find("#23"), std::string::npos) << c.message;
  EXPECT_TRUE(tc::compare(got, expected, 1e-2).pass);
}

TEST(Compare, RelativeAboveOneAbsoluteBelow) {
  const HostTensor e = HostTensor::from_values(TDM_F64, {2}, {1000.0, 0.001});
  const HostTensor g = HostTensor::from_values(TDM_F64, {2}, {1000.5, 0.0015});
  const tc::Comparison c = tc::compare(g, e, 1);
  EXPECT_NEAR(c.max_err, 5e-4, 1e-12);  // both: 0.5/1000 relative, 0.0005 absolute
}

TEST(Compare, NanNeverPasses) {
  const HostTensor e = ramp(TDM_F32, 4);
  HostTensor g = e;
  g.set(2, std::numeric_limits<double>::quiet_NaN());
  EXPECT_FALSE(tc::compare(g, e, 1e30).pass);
  EXPECT_FALSE(tc::compare(e, g, 1e30).pass);  // NaN expected doesn't pass either
  EXPECT_FALSE(tc::compare(g, g, 1e30).pass);  // not even NaN against NaN
  EXPECT_EQ(tc::compare(g, e, 1).worst_index, 2);
}

TEST(Compare, InfinitiesMustMatch) {
  const double inf = std::numeric_limits<double>::infinity();
  const HostTensor a = HostTensor::from_values(TDM_F32, {2}, {inf, -inf});
  const HostTensor b = HostTensor::from_values(TDM_F32, {2}, {inf, inf});
  EXPECT_TRUE(tc::compare(a, a, 0).pass);
  EXPECT_FALSE(tc::compare(a, b, 1e30).pass);
}

TEST(Compare, ShapeOrDtypeMismatchFails) {
  EXPECT_FALSE(tc::compare(ramp(TDM_F32, 4), ramp(TDM_F32, 5), 1).pass);
  EXPECT_FALSE(tc::compare(ramp(TDM_F32, 4), ramp(TDM_BF16, 4), 1).pass);
}

TEST(Compare, IntegersAreExact) {
  const HostTensor e = HostTensor::from_values(TDM_S32, {3}, {1, 2, 3});
  const HostTensor g = HostTensor::from_values(TDM_S32, {3}, {1, 2, 4});
  EXPECT_EQ(tc::tolerance("add", TDM_S32, 0), 0);
  EXPECT_FALSE(tc::compare(g, e, tc::tolerance("add", TDM_S32, 0)).pass);
}

TEST(Tolerance, TableIsOrdered) {
  // Narrower dtypes get more room; accumulation widens with sqrt(k).
  for (const char* op : {"add", "gelu", "matmul", "layer_norm", "adamw_update"}) {
    EXPECT_LT(tc::tolerance(op, TDM_F64, 0), tc::tolerance(op, TDM_F32, 0)) << op;
    EXPECT_LT(tc::tolerance(op, TDM_F32, 0), tc::tolerance(op, TDM_F16, 0)) << op;
    EXPECT_LE(tc::tolerance(op, TDM_F16, 0), tc::tolerance(op, TDM_BF16, 0)) << op;
  }
  EXPECT_LT(tc::tolerance("matmul", TDM_F32, 16), tc::tolerance("matmul", TDM_F32, 4096));
  EXPECT_EQ(tc::tolerance("transpose", TDM_F32, 0), 0);
  EXPECT_EQ(tc::op_class("dropout"), tc::OpClass::elementwise);
  EXPECT_NE(tc::tolerance_table().find("bf16"), std::string::npos);
}
