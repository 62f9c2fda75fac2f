// matmul and linear, values computed by hand in the comments.
#include "expect.hpp"

using namespace ref_test;

TEST(Matmul, Plain2x3By3x2) {
  // [[1,2,3],[4,5,6]]·[[7,8],[9,10],[11,12]] = [[58,64],[139,154]]
  std::vector<Tensor> o = {out(TDM_F32, {2, 2})};
  auto r = run("matmul", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 2}, {7, 8, 9, 10, 11, 12})}, o);
  EXPECT_RUN_OK(r);
  expect_f32(o[0], {58, 64, 139, 154});
  EXPECT_EQ(r.describe, "reference:matmul");
}

TEST(Matmul, TransposeBAndBatchBroadcast) {
  // a=[1,2], b=[[1,0],[2,3]], y = a·bᵀ = [1·1+2·0, 1·2+2·3] = [1, 8]
  std::vector<Tensor> o = {out(TDM_F32, {1, 2})};
  EXPECT_RUN_OK(run("matmul", {f32({1, 2}, {1, 2}), f32({2, 2}, {1, 0, 2, 3})}, o, {attr("transpose_b", 1)}));
  expect_f32(o[0], {1, 8});
  // batch [2] against no batch: [[1,2]]·[5,6]ᵀ = 17, [[3,4]]·[5,6]ᵀ = 39
  std::vector<Tensor> o2 = {out(TDM_F32, {2, 1, 1})};
  EXPECT_RUN_OK(run("matmul", {f32({2, 1, 2}, {1, 2, 3, 4}), f32({2, 1}, {5, 6})}, o2));
  expect_f32(o2[0], {17, 39});
}

TEST(Linear, BiasAndFusedRelu) {
  // x·wᵀ = [[3,-1],[-3,1]]; + bias [0.5,-0.5] = [[3.5,-1.5],[-2.5,0.5]]; relu
  std::vector<Tensor> o = {out(TDM_F32, {2, 2})};
  EXPECT_RUN_OK(run("linear",
                    {f32({2, 2}, {1, 2, -1, -2}), f32({2, 2}, {1, 1, 1, -1}), f32({2}, {0.5f, -0.5f})}, o,
                    {attr("activation", "relu")}));
  expect_f32(o[0], {3.5, 0, 0, 0.5});
  // Without bias (absent slot) and activation: [[3,-1],[-3,1]]
  EXPECT_RUN_OK(run("linear", {f32({2, 2}, {1, 2, -1, -2}), f32({2, 2}, {1, 1, 1, -1}), absent()}, o));
  expect_f32(o[0], {3, -1, -3, 1});
}

TEST(Linear, Gradients) {
  // dx = dy·w with dy = I: dx = w = [[1,1],[1,-1]]
  std::vector<Tensor> dx = {out(TDM_F32, {2, 2})};
  EXPECT_RUN_OK(run("linear_grad_input", {f32({2, 2}, {1, 0, 0, 1}), f32({2, 2}, {1, 1, 1, -1})}, dx));
  expect_f32(dx[0], {1, 1, 1, -1});
  // dw = dyᵀ·x with x = I: dw = dyᵀ = [[1,3],[2,4]]; dbias = column sums [4,6]
  std::vector<Tensor> dw = {out(TDM_F32, {2, 2}), out(TDM_F32, {2})};
  EXPECT_RUN_OK(run("linear_grad_weight", {f32({2, 2}, {1, 2, 3, 4}), f32({2, 2}, {1, 0, 0, 1})}, dw));
  expect_f32(dw[0], {1, 3, 2, 4});
  expect_f32(dw[1], {4, 6});
}

TEST(Matmul, F64Accepted) {
  std::vector<Tensor> o = {out(TDM_F64, {1, 1})};
  EXPECT_RUN_OK(run("matmul", {f64({1, 2}, {0.1, 0.2}), f64({2, 1}, {3, 4})}, o));
  expect_near<double>(o[0], {0.1 * 3 + 0.2 * 4}, 1e-15);
}

// bf16 patterns of values with 8 significant bits, and the f32 values they hold.
namespace {
std::vector<uint16_t> bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> b;
  for (float f : v) {
    uint32_t u = 0;
    std::memcpy(&u, &f, 4);
    EXPECT_EQ(u & 0xFFFFu, 0u) << f << " is not a bf16 value";
    b.push_back(uint16_t(u >> 16));
  }
  return b;
}
}  // namespace

TEST(Linear, WideOutputsAreTheF32SumsOfBf16Operands) {
  // x·wᵀ with x = [[1, 2^-8]], w = [[1, 1]]: 1 + 2^-8 is exact in f32 but
  // lies between two bf16 values (a bf16 output would round it to 1).
  const std::vector<float> x = {1.0f, 0x1p-8f, -3.0f, 0.5f}, w = {1.0f, 1.0f, 0.25f, 2.0f};
  std::vector<Tensor> wide = {out(TDM_F32, {2, 2})}, f32_out = {out(TDM_F32, {2, 2})};
  EXPECT_RUN_OK(run("linear",
                    {bits16(TDM_BF16, {2, 2}, bf16_bits(x)), bits16(TDM_BF16, {2, 2}, bf16_bits(w)),
                     f32({2}, {0x1p-10f, 0.0f})},
                    wide));
  EXPECT_RUN_OK(run("linear", {f32({2, 2}, x), f32({2, 2}, w), f32({2}, {0x1p-10f, 0.0f})}, f32_out));
  EXPECT_EQ(wide[0].bytes, f32_out[0].bytes);
  EXPECT_EQ(wide[0].as<float>()[0], 1.0f + 0x1p-8f + 0x1p-10f);
  // A bf16 bias with an f32 output is refused: the bias has the output's dtype.
  std::vector<Tensor> o = {out(TDM_F32, {2, 2})};
  EXPECT_EQ(run("linear",
                {bits16(TDM_BF16, {2, 2}, bf16_bits(x)), bits16(TDM_BF16, {2, 2}, bf16_bits(w)),
                 bits16(TDM_BF16, {2}, bf16_bits({1.0f, 1.0f}))},
                o)
                .status,
            TDM_INVALID_ARGUMENT);
  // dw = dyᵀ·x and dbias likewise.
  std::vector<Tensor> dw = {out(TDM_F32, {2, 2}), out(TDM_F32, {2})},
                      dw32 = {out(TDM_F32, {2, 2}), out(TDM_F32, {2})};
  EXPECT_RUN_OK(run("linear_grad_weight",
                    {bits16(TDM_BF16, {2, 2}, bf16_bits(x)), bits16(TDM_BF16, {2, 2}, bf16_bits(w))}, dw));
  EXPECT_RUN_OK(run("linear_grad_weight", {f32({2, 2}, x), f32({2, 2}, w)}, dw32));
  EXPECT_EQ(dw[0].bytes, dw32[0].bytes);
  EXPECT_EQ(dw[1].bytes, dw32[1].bytes);
  EXPECT_EQ(dw[1].as<float>()[1], 0x1p-8f + 0.5f);
}
