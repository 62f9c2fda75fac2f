// conv2d and pooling, values computed by hand in the comments.
#include "expect.hpp"

using namespace ref_test;

namespace {
// x = 1..9 as a 1×1×3×3 image:  1 2 3 / 4 5 6 / 7 8 9
Tensor image3x3() {
  return f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
}
// w = [[1,0],[0,1]]: y[p,q] = x[p,q] + x[p+1,q+1]
Tensor diagonal2x2() {
  return f32({1, 1, 2, 2}, {1, 0, 0, 1});
}
}  // namespace

TEST(Conv2d, Forward) {
  // P = (3 - 1·(2-1) - 1)/1 + 1 = 2; y = [1+5, 2+6, 4+8, 5+9] + bias 1
  std::vector<Tensor> o = {out(TDM_F32, {1, 1, 2, 2})};
  EXPECT_RUN_OK(run("conv2d", {image3x3(), diagonal2x2(), f32({1}, {1})}, o));
  expect_f32(o[0], {7, 9, 13, 15});
}

TEST(Conv2d, PaddingStrideDilation) {
  // pad 1, stride 2: P = floor((3 + 2 - 1 - 1)/2) + 1 = 2. Each window's
  // top-left tap is padding except the last: y = [x00, x02, x20, x11 + x22]
  std::vector<Tensor> o = {out(TDM_F32, {1, 1, 2, 2})};
  EXPECT_RUN_OK(
      run("conv2d", {image3x3(), diagonal2x2(), absent()}, o,
          {attr("padding", std::vector<int64_t>{1, 1}), attr("stride", std::vector<int64_t>{2, 2})}));
  expect_f32(o[0], {1, 3, 7, 14});
  // dilation 2 with w = ones: P = (3 - 2·1 - 1) + 1 = 1; y = x00+x02+x20+x22 = 20
  std::vector<Tensor> o2 = {out(TDM_F32, {1, 1, 1, 1})};
  EXPECT_RUN_OK(run("conv2d", {image3x3(), f32({1, 1, 2, 2}, {1, 1, 1, 1}), absent()}, o2,
                    {attr("dilation", std::vector<int64_t>{2, 2})}));
  expect_f32(o2[0], {20});
}

TEST(Conv2d, Groups) {
  // 2 channels, 2 groups, 1×1 filters [2] and [3]: each channel scaled alone.
  std::vector<Tensor> o = {out(TDM_F32, {1, 2, 1, 1})};
  EXPECT_RUN_OK(run("conv2d", {f32({1, 2, 1, 1}, {5, 7}), f32({2, 1, 1, 1}, {2, 3}), absent()}, o,
                    {attr("groups", 2)}));
  expect_f32(o[0], {10, 21});
}

TEST(Conv2d, Gradients) {
  // dy = ones[2×2]: dx gets w00 at (p,q) and w11 at (p+1,q+1)
  //   1 1 0 / 1 2 1 / 0 1 1
  std::vector<Tensor> dx = {out(TDM_F32, {1, 1, 3, 3})};
  EXPECT_RUN_OK(run("conv2d_grad_input", {f32({1, 1, 2, 2}, {1, 1, 1, 1}), diagonal2x2()}, dx));
  expect_f32(dx[0], {1, 1, 0, 1, 2, 1, 0, 1, 1});
  // dw[r,s] = Σ_pq x[p+r,q+s]: 1+2+4+5=12, 2+3+5+6=16, 4+5+7+8=24, 5+6+8+9=28; dbias = 4
  std::vector<Tensor> dw = {out(TDM_F32, {1, 1, 2, 2}), out(TDM_F32, {1})};
  EXPECT_RUN_OK(run("conv2d_grad_weight", {f32({1, 1, 2, 2}, {1, 1, 1, 1}), image3x3()}, dw));
  expect_f32(dw[0], {12, 16, 24, 28});
  expect_f32(dw[1], {4});
}

TEST(MaxPool, TiesGoToFirstMaximum) {
  // window [[5,5],[1,5]]: max 5; the gradient goes to the first 5 (row-major)
  const Tensor x = f32({1, 1, 2, 2}, {5, 5, 1, 5});
  std::vector<Tensor> y = {out(TDM_F32, {1, 1, 1, 1})};
  EXPECT_RUN_OK(run("max_pool2d", {x}, y, {attr("kernel", std::vector<int64_t>{2, 2})}));
  expect_f32(y[0], {5});
  std::vector<Tensor> dx = {out(TDM_F32, {1, 1, 2, 2})};
  EXPECT_RUN_OK(
      run("max_pool2d_grad", {f32({1, 1, 1, 1}, {3}), x}, dx, {attr("kernel", std::vector<int64_t>{2, 2})}));
  expect_f32(dx[0], {3, 0, 0, 0});
}

TEST(MaxPool, PaddingIsMinusInfinity) {
  // kernel 2, stride 2, pad 1 on a 2×2 image: P = (2+2-2)/2 + 1 = 2; each
  // window holds one real element, all negative: padding (-inf) never wins.
  std::vector<Tensor> y = {out(TDM_F32, {1, 1, 2, 2})};
  EXPECT_RUN_OK(
      run("max_pool2d", {f32({1, 1, 2, 2}, {-1, -2, -3, -4})}, y,
          {attr("kernel", std::vector<int64_t>{2, 2}), attr("padding", std::vector<int64_t>{1, 1})}));
  expect_f32(y[0], {-1, -2, -3, -4});
}

TEST(AvgPool, PaddingCountedOrNot) {
  const std::vector<Attr> base = {attr("kernel", std::vector<int64_t>{2, 2}),
                                  attr("padding", std::vector<int64_t>{1, 1})};
  // Excluded: each window averages its single real element.
  std::vector<Tensor> y = {out(TDM_F32, {1, 1, 2, 2})};
  EXPECT_RUN_OK(run("avg_pool2d", {f32({1, 1, 2, 2}, {-1, -2, -3, -4})}, y, base));
  expect_f32(y[0], {-1, -2, -3, -4});
  // Included: divided by 2·2 = 4.
  std::vector<Attr> incl = base;
  incl.push_back(attr("count_include_pad", 1));
  EXPECT_RUN_OK(run("avg_pool2d", {f32({1, 1, 2, 2}, {-1, -2, -3, -4})}, y, incl));
  expect_f32(y[0], {-0.25, -0.5, -0.75, -1});
}

TEST(AvgPool, Gradient) {
  // kernel 2, stride 1 on 3×3: dx = (number of windows covering the pixel)/4
  std::vector<Tensor> dx = {out(TDM_F32, {1, 1, 3, 3})};
  EXPECT_RUN_OK(
      run("avg_pool2d_grad", {f32({1, 1, 2, 2}, {1, 1, 1, 1})}, dx,
          {attr("kernel", std::vector<int64_t>{2, 2}), attr("stride", std::vector<int64_t>{1, 1})}));
  expect_f32(dx[0], {0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25});
}
