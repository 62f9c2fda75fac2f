// Activations, softmax and cross entropy; values computed by hand.
#include <cmath>

#include "expect.hpp"

using namespace ref_test;

TEST(Activation, ReluAndGrad) {
  std::vector<Tensor> y = {out(TDM_F32, {3})};
  EXPECT_RUN_OK(run("relu", {f32({3}, {-1, 0, 2})}, y));
  expect_f32(y[0], {0, 0, 2});
  // The derivative at 0 is taken as 0.
  EXPECT_RUN_OK(run("relu_grad", {f32({3}, {5, 5, 5}), f32({3}, {-1, 0, 2})}, y));
  expect_f32(y[0], {0, 0, 5});
}

TEST(Activation, LeakyReluAndGrad) {
  std::vector<Tensor> y = {out(TDM_F32, {4})};
  EXPECT_RUN_OK(run("leaky_relu", {f32({4}, {-2, -0.5f, 0, 3})}, y));  // default slope 0.01
  expect_f32(y[0], {-0.02, -0.005, 0, 3});
  EXPECT_RUN_OK(run("leaky_relu", {f32({4}, {-2, -0.5f, 0, 3})}, y, {attr("negative_slope", 0.25)}));
  expect_f32(y[0], {-0.5, -0.125, 0, 3});
  // The derivative at 0 is taken as the slope.
  EXPECT_RUN_OK(run("leaky_relu_grad", {f32({4}, {4, 4, 4, 4}), f32({4}, {-2, -0.5f, 0, 3})}, y,
                    {attr("negative_slope", 0.25)}));
  expect_f32(y[0], {1, 1, 1, 4});
  EXPECT_EQ(run("leaky_relu", {f32({4}, {1, 2, 3, 4})}, y, {attr("negative_slope", std::nan(""))}).status,
            TDM_INVALID_ARGUMENT);
}

TEST(Activation, SoftplusWithBetaAndThresholdAsTorch) {
  // log(1 + e^x): log(1 + e^-2) = 0.1269280, log 2 = 0.6931472, log(1 + e) = 1.3132617;
  // 25 is past the default threshold 20, so y = x.
  std::vector<Tensor> y = {out(TDM_F32, {4})};
  EXPECT_RUN_OK(run("softplus", {f32({4}, {-2, 0, 1, 25})}, y));
  expect_f32(y[0], {0.1269280, 0.6931472, 1.3132617, 25});
  // beta = 2: log(1 + e^(2x)) / 2 = 0.0090750 at -2, 1.0634640 at 1.
  std::vector<Tensor> y2 = {out(TDM_F32, {2})};
  EXPECT_RUN_OK(run("softplus", {f32({2}, {-2, 1})}, y2, {attr("beta", 2.0)}));
  expect_f32(y2[0], {0.0090750, 1.0634640});
  // threshold = 1: linear above it (2), the curve below (log(1 + e^0.5) = 0.9740770).
  EXPECT_RUN_OK(run("softplus", {f32({2}, {0.5f, 2})}, y2, {attr("threshold", 1.0)}));
  expect_f32(y2[0], {0.9740770, 2});
  // dx = dy·sigmoid(beta·x), dy past the threshold: 4·σ(-2) = 0.4768117, 4·σ(0) = 2, 4·σ(1) = 2.9242343.
  EXPECT_RUN_OK(run("softplus_grad", {f32({4}, {4, 4, 4, 4}), f32({4}, {-2, 0, 1, 25})}, y));
  expect_f32(y[0], {0.4768117, 2, 2.9242343, 4});
  EXPECT_RUN_OK(run("softplus_grad", {f32({2}, {4, 4}), f32({2}, {1, 25})}, y2, {attr("beta", 2.0)}));
  expect_f32(y2[0], {3.5231883, 4});
  // beta must be positive (the catalog's range): 0 would divide by zero.
  EXPECT_EQ(run("softplus", {f32({2}, {1, 2})}, y2, {attr("beta", 0.0)}).status, TDM_INVALID_ARGUMENT);
}

TEST(Activation, GeluExactAndTanh) {
  // exact: 0.5·(1 + erf(1/√2)) = 0.8413447; tanh: 0.5·(1 + tanh(√(2/π)·1.044715)) = 0.8411920
  std::vector<Tensor> y = {out(TDM_F32, {2})};
  EXPECT_RUN_OK(run("gelu", {f32({2}, {1, 0})}, y));
  expect_f32(y[0], {0.8413447, 0});
  EXPECT_RUN_OK(run("gelu", {f32({2}, {1, 0})}, y, {attr("approximate", "tanh")}));
  expect_f32(y[0], {0.8411920, 0});
  // gelu'(1) = Φ(1) + φ(1) = 0.8413447 + 0.2419707 = 1.0833155; gelu'(0) = 0.5
  EXPECT_RUN_OK(run("gelu_grad", {f32({2}, {1, 1}), f32({2}, {1, 0})}, y));
  expect_f32(y[0], {1.0833155, 0.5});
}

TEST(Activation, SigmoidTanhFromOutput) {
  std::vector<Tensor> y = {out(TDM_F32, {1})};
  EXPECT_RUN_OK(run("sigmoid", {f32({1}, {0})}, y));
  expect_f32(y[0], {0.5});
  // sigmoid_grad: dy·y·(1-y) = 2·0.25; tanh_grad: dy·(1-y²) = 1·0.75
  EXPECT_RUN_OK(run("sigmoid_grad", {f32({1}, {2}), f32({1}, {0.5f})}, y));
  expect_f32(y[0], {0.5});
  EXPECT_RUN_OK(run("tanh_grad", {f32({1}, {1}), f32({1}, {0.5f})}, y));
  expect_f32(y[0], {0.75});
}

TEST(Softmax, ForwardLogAndGrad) {
  // x = [0, ln 3]: softmax = [1/4, 3/4]
  const float ln3 = std::log(3.0f);
  std::vector<Tensor> y = {out(TDM_F32, {1, 2})};
  EXPECT_RUN_OK(run("softmax", {f32({1, 2}, {0, ln3})}, y));
  expect_f32(y[0], {0.25, 0.75});
  EXPECT_RUN_OK(run("log_softmax", {f32({1, 2}, {0, ln3})}, y));
  expect_f32(y[0], {std::log(0.25), std::log(0.75)});
  // softmax_grad: s = Σ dy·y = 0.25; dx = y·(dy - s) = [0.1875, -0.1875]
  EXPECT_RUN_OK(run("softmax_grad", {f32({1, 2}, {1, 0}), f32({1, 2}, {0.25f, 0.75f})}, y));
  expect_f32(y[0], {0.1875, -0.1875});
  // along axis 0 of a [2,1] tensor
  std::vector<Tensor> y2 = {out(TDM_F32, {2, 1})};
  EXPECT_RUN_OK(run("softmax", {f32({2, 1}, {0, ln3})}, y2, {attr("axis", 0)}));
  expect_f32(y2[0], {0.25, 0.75});
}

TEST(CrossEntropy, MeanIgnoreAndSmoothing) {
  // sample 0: p = [1/4, 3/4], label 1 → -ln 0.75 = 0.2876821
  // sample 1: p = [1/2, 1/2], label 0 → ln 2 = 0.6931472; mean 0.4904146
  const float ln3 = std::log(3.0f);
  const Tensor logits = f32({2, 2}, {0, ln3, 0, 0});
  std::vector<Tensor> loss = {out(TDM_F32, {})};
  EXPECT_RUN_OK(run("softmax_cross_entropy", {logits, s32({2}, {1, 0})}, loss));
  expect_f32(loss[0], {0.4904146});
  // sample 1 ignored: mean over the one remaining sample
  EXPECT_RUN_OK(run("softmax_cross_entropy", {logits, s32({2}, {1, -100})}, loss));
  expect_f32(loss[0], {0.2876821});
  // sum
  EXPECT_RUN_OK(run("softmax_cross_entropy", {logits, s32({2}, {1, 0})}, loss, {attr("reduction", "sum")}));
  expect_f32(loss[0], {0.9808293});
  // ε = 0.1: sample 0: 0.9·0.2876821 + 0.1·(1.3862944 + 0.2876821)/2 = 0.3426127;
  // sample 1: ln 2; mean 0.5178799
  EXPECT_RUN_OK(
      run("softmax_cross_entropy", {logits, s32({2}, {1, 0})}, loss, {attr("label_smoothing", 0.1)}));
  expect_f32(loss[0], {0.5178799});
}

TEST(CrossEntropy, Gradient) {
  // (p - onehot)/N: sample 0 [0.25-0, 0.75-1]/2, sample 1 [0.5-1, 0.5-0]/2; dloss = 2
  const float ln3 = std::log(3.0f);
  std::vector<Tensor> g = {out(TDM_F32, {2, 2})};
  EXPECT_RUN_OK(
      run("softmax_cross_entropy_grad", {f32({}, {2}), f32({2, 2}, {0, ln3, 0, 0}), s32({2}, {1, 0})}, g));
  expect_f32(g[0], {0.25, -0.25, -0.5, 0.5});
  // ignored sample: zero row; the other is divided by 1
  EXPECT_RUN_OK(run("softmax_cross_entropy_grad",
                    {f32({}, {1}), f32({2, 2}, {0, ln3, 0, 0}), s32({2}, {1, 7})}, g,
                    {attr("ignore_index", 7)}));
  expect_f32(g[0], {0.25, -0.25, 0, 0});
}

TEST(CrossEntropy, LabelOutOfRangeFailsAtLaunch) {
  std::vector<Tensor> loss = {out(TDM_F32, {})};
  auto r = run("softmax_cross_entropy", {f32({2, 2}, {0, 0, 0, 0}), s32({2}, {0, 2})}, loss);
  EXPECT_EQ(r.status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(r.failed_at, Stage::Launch);
  EXPECT_NE(r.message.find("label 2 of sample 1"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("softmax_cross_entropy"), std::string::npos) << r.message;
}
