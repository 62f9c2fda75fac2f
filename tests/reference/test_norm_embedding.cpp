// layer_norm, batch_norm and embedding; values computed by hand.
#include "expect.hpp"

using namespace ref_test;

TEST(LayerNorm, ForwardAndGrad) {
  // x = [1,2,3,4]: mean 2.5, biased var 1.25, rstd = 1/√1.25 = 0.8944272 (eps 0)
  // y = [-1.5,-0.5,0.5,1.5]·rstd·gamma(2) + beta(1)
  std::vector<Tensor> o = {out(TDM_F32, {1, 4}), out(TDM_F32, {1}), out(TDM_F32, {1})};
  const Tensor x = f32({1, 4}, {1, 2, 3, 4}), gamma = f32({4}, {2, 2, 2, 2});
  EXPECT_RUN_OK(run("layer_norm", {x, gamma, f32({4}, {1, 1, 1, 1})}, o, {attr("epsilon", 0.0)}));
  expect_f32(o[0], {1 - 2.6832816, 1 - 0.8944272, 1 + 0.8944272, 1 + 2.6832816});
  expect_f32(o[1], {2.5});
  expect_f32(o[2], {0.8944272});
  // dy = ones: g = dy·gamma is constant, so dx = rstd·(g - mean g - x̂·mean(g·x̂)) = 0;
  // dgamma = x̂ = [-1.3416408, -0.4472136, 0.4472136, 1.3416408]; dbeta = 1
  std::vector<Tensor> g = {out(TDM_F32, {1, 4}), out(TDM_F32, {4}), out(TDM_F32, {4})};
  EXPECT_RUN_OK(run("layer_norm_grad", {f32({1, 4}, {1, 1, 1, 1}), x, gamma, o[1], o[2]}, g));
  expect_f32(g[0], {0, 0, 0, 0});
  expect_f32(g[1], {-1.3416408, -0.4472136, 0.4472136, 1.3416408});
  expect_f32(g[2], {1, 1, 1, 1});
}

TEST(BatchNorm, TrainUpdatesRunningStatsLikePyTorch) {
  // x[2,1] = [1,3]: mean 2, biased var 1 (normalise), unbiased var 2 (running)
  // y = [-1, 1]; running_mean 0.9·0 + 0.1·2 = 0.2; running_var 0.9·1 + 0.1·2 = 1.1
  std::vector<Tensor> o = {out(TDM_F32, {2, 1}), out(TDM_F32, {1}), out(TDM_F32, {1}), out(TDM_F32, {1}),
                           out(TDM_F32, {1})};
  EXPECT_RUN_OK(run("batch_norm_train",
                    {f32({2, 1}, {1, 3}), f32({1}, {1}), f32({1}, {0}), f32({1}, {0}), f32({1}, {1})}, o,
                    {attr("epsilon", 0.0)}));
  expect_f32(o[0], {-1, 1});
  expect_f32(o[1], {2});
  expect_f32(o[2], {1});
  expect_f32(o[3], {0.2});
  expect_f32(o[4], {1.1});
}

TEST(BatchNorm, InferenceAndGrad) {
  // (x - 2)/√(3 + 1)·2 + 1 for x = [1, 3] → [0, 2]
  std::vector<Tensor> y = {out(TDM_F32, {2, 1})};
  EXPECT_RUN_OK(run("batch_norm_inference",
                    {f32({2, 1}, {1, 3}), f32({1}, {2}), f32({1}, {1}), f32({1}, {2}), f32({1}, {3})}, y,
                    {attr("epsilon", 1.0)}));
  expect_f32(y[0], {0, 2});
  // x = [0,1,2] (N=3, C=1): mean 1, var 2/3, rstd = √1.5 = 1.2247449, x̂ = [-1.2247449, 0, 1.2247449]
  // dy = [1,0,0]: mean(dy) = 1/3, mean(dy·x̂) = -0.4082483
  // dx = rstd·(dy - 1/3 - x̂·(-0.4082483)) = rstd·[1/6, -1/3, 1/6] = [0.2041241, -0.4082483, 0.2041241]
  std::vector<Tensor> g = {out(TDM_F32, {3, 1}), out(TDM_F32, {1}), out(TDM_F32, {1})};
  EXPECT_RUN_OK(run(
      "batch_norm_grad",
      {f32({3, 1}, {1, 0, 0}), f32({3, 1}, {0, 1, 2}), f32({1}, {1}), f32({1}, {1}), f32({1}, {1.2247449f})},
      g));
  expect_f32(g[0], {0.2041241, -0.4082483, 0.2041241});
  expect_f32(g[1], {-1.2247449});
  expect_f32(g[2], {1});
}

TEST(Embedding, LookupAndGradWithPadding) {
  // table rows: [1,2], [3,4], [5,6]; indices [2,0,2]
  const Tensor table = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  std::vector<Tensor> y = {out(TDM_F32, {3, 2})};
  EXPECT_RUN_OK(run("embedding", {table, s32({3}, {2, 0, 2})}, y));
  expect_f32(y[0], {5, 6, 1, 2, 5, 6});
  // dtable[2] = dy0 + dy2 = [1+5, 2+6]; row 0 is padding_idx: zero
  std::vector<Tensor> g = {out(TDM_F32, {3, 2})};
  EXPECT_RUN_OK(run("embedding_grad", {f32({3, 2}, {1, 2, 3, 4, 5, 6}), s32({3}, {2, 0, 2})}, g,
                    {attr("padding_idx", 0)}));
  expect_f32(g[0], {0, 0, 0, 0, 6, 8});
}

TEST(Embedding, IndexOutOfRangeFailsAtLaunch) {
  std::vector<Tensor> y = {out(TDM_F32, {2, 2})};
  auto r = run("embedding", {f32({3, 2}, {1, 2, 3, 4, 5, 6}), s32({2}, {1, -1})}, y);
  EXPECT_EQ(r.status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(r.failed_at, Stage::Launch);
  EXPECT_NE(r.message.find("index -1 at position 1"), std::string::npos) << r.message;
}
