// Broadcasting arithmetic, reductions and shape ops.
#include <cstdint>

#include "expect.hpp"

using namespace ref_test;

TEST(Elementwise, BroadcastAdd2x3Plus3) {
  // [[1,2,3],[4,5,6]] + [10,20,30]
  std::vector<Tensor> y = {out(TDM_F32, {2, 3})};
  EXPECT_RUN_OK(run("add", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {10, 20, 30})}, y));
  expect_f32(y[0], {11, 22, 33, 14, 25, 36});
  // [2,1] - [3] → [2,3]: [[1-1, 1-2, 1-3], [5-1, 5-2, 5-3]]
  EXPECT_RUN_OK(run("sub", {f32({2, 1}, {1, 5}), f32({3}, {1, 2, 3})}, y));
  expect_f32(y[0], {0, -1, -2, 4, 3, 2});
}

TEST(Elementwise, S32WrapsAround) {
  // 65536·65536 = 2^32 ≡ 0; INT32_MAX·1 stays; 2^31-1 + 1 wraps to -2^31
  std::vector<Tensor> y = {out(TDM_S32, {2})};
  EXPECT_RUN_OK(run("mul", {s32({2}, {65536, INT32_MAX}), s32({2}, {65536, 1})}, y));
  EXPECT_EQ(y[0].as<int32_t>(), (std::vector<int32_t>{0, INT32_MAX}));
  EXPECT_RUN_OK(run("add", {s32({1}, {INT32_MAX}), s32({}, {1})}, y = {out(TDM_S32, {1})}));
  EXPECT_EQ(y[0].as<int32_t>()[0], INT32_MIN);
}

TEST(Elementwise, Bf16RoundsTiesToEven) {
  // 1 + 2^-8 lies halfway between bf16 1.0 (0x3F80) and 1.0078125 (0x3F81): even → 0x3F80
  // 1 + 3·2^-8 lies halfway between 0x3F81 and 0x3F82: even → 0x3F82
  std::vector<Tensor> y = {out(TDM_BF16, {2})};
  // 2^-8 is 0x3B80 in bf16, 3·2^-8 is 0x3C40
  EXPECT_RUN_OK(
      run("add", {bits16(TDM_BF16, {2}, {0x3F80, 0x3F80}), bits16(TDM_BF16, {2}, {0x3B80, 0x3C40})}, y));
  EXPECT_EQ(y[0].as<uint16_t>(), (std::vector<uint16_t>{0x3F80, 0x3F82}));
}

TEST(Elementwise, Scale) {
  std::vector<Tensor> y = {out(TDM_F32, {2})};
  EXPECT_RUN_OK(run("scale", {f32({2}, {1, 2})}, y, {attr("alpha", 2.0), attr("beta", 1.0)}));
  expect_f32(y[0], {3, 5});
}

TEST(Reduce, SumAndMean) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<Tensor> all = {out(TDM_F32, {})};
  EXPECT_RUN_OK(run("reduce_sum", {x}, all));
  expect_f32(all[0], {21});
  std::vector<Tensor> cols = {out(TDM_F32, {3})};
  EXPECT_RUN_OK(run("reduce_sum", {x}, cols, {attr("axes", std::vector<int64_t>{0})}));
  expect_f32(cols[0], {5, 7, 9});
  std::vector<Tensor> rows = {out(TDM_F32, {2, 1})};
  EXPECT_RUN_OK(run("reduce_mean", {x}, rows, {attr("axes", std::vector<int64_t>{-1}), attr("keepdims", 1)}));
  expect_f32(rows[0], {2, 5});
}

TEST(Shape, ReshapeTransposeConcat) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<Tensor> r = {out(TDM_F32, {3, 2})};
  EXPECT_RUN_OK(run("reshape", {x}, r));
  expect_f32(r[0], {1, 2, 3, 4, 5, 6});
  // default perm reverses: y[j,i] = x[i,j]
  EXPECT_RUN_OK(run("transpose", {x}, r));
  expect_f32(r[0], {1, 4, 2, 5, 3, 6});
  // perm [0,2,1] of [1,2,3]
  std::vector<Tensor> t = {out(TDM_F32, {1, 3, 2})};
  EXPECT_RUN_OK(run("transpose", {f32({1, 2, 3}, {1, 2, 3, 4, 5, 6})}, t,
                    {attr("perm", std::vector<int64_t>{0, 2, 1})}));
  expect_f32(t[0], {1, 4, 2, 5, 3, 6});
  // concat along axis 1: [[1],[2]] ++ [[3,4],[5,6]] = [[1,3,4],[2,5,6]]
  std::vector<Tensor> c = {out(TDM_F32, {2, 3})};
  EXPECT_RUN_OK(run("concat", {f32({2, 1}, {1, 2}), f32({2, 2}, {3, 4, 5, 6})}, c, {attr("axis", 1)}));
  expect_f32(c[0], {1, 3, 4, 2, 5, 6});
  // axis 0 on s64 (all dtypes are byte moves)
  std::vector<Tensor> c2 = {out(TDM_S64, {3})};
  EXPECT_RUN_OK(run("concat", {make<int64_t>(TDM_S64, {1}, {7}), make<int64_t>(TDM_S64, {2}, {8, 9})}, c2));
  EXPECT_EQ(c2[0].as<int64_t>(), (std::vector<int64_t>{7, 8, 9}));
}

TEST(Shape, FillAndCopy) {
  // fill converts with the cast rules: 2.5 → s32 2 (ties to even)
  std::vector<Tensor> y = {out(TDM_S32, {2})};
  EXPECT_RUN_OK(run("fill", {}, y, {attr("value", 2.5)}));
  EXPECT_EQ(y[0].as<int32_t>(), (std::vector<int32_t>{2, 2}));
  std::vector<Tensor> f = {out(TDM_F32, {3})};
  EXPECT_RUN_OK(run("fill", {}, f, {attr("value", 1.5)}));
  expect_f32(f[0], {1.5, 1.5, 1.5});
  std::vector<Tensor> c = {out(TDM_U8, {3})};
  EXPECT_RUN_OK(run("copy", {u8({3}, {1, 2, 3})}, c));
  EXPECT_EQ(c[0].as<uint8_t>(), (std::vector<uint8_t>{1, 2, 3}));
}
