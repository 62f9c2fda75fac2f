// dropout (mask reproduced from the catalog's formula) and optimizers.
#include <cstdint>

#include "expect.hpp"

using namespace ref_test;

namespace {
// The catalog's counter-based RNG, written out again independently.
bool keep(uint64_t seed, uint64_t i, double p) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 40) / 16777216.0 >= p;
}
}  // namespace

TEST(Dropout, FirstElementOfSeedZero) {
  // SplitMix64's first output for state 0 is 0xE220A8397B1DCDAF, so
  // u = 0xE220A8 / 2^24 = 0.8833108: kept for p = 0.88, dropped for p = 0.9.
  std::vector<Tensor> o = {out(TDM_F32, {1}), out(TDM_U8, {1})};
  EXPECT_RUN_OK(run("dropout", {f32({1}, {3})}, o, {attr("p", 0.88), attr("seed", 0)}));
  expect_f32(o[0], {3 / 0.12});
  EXPECT_EQ(o[1].as<uint8_t>()[0], 1);
  EXPECT_RUN_OK(run("dropout", {f32({1}, {3})}, o, {attr("p", 0.9), attr("seed", 0)}));
  expect_f32(o[0], {0});
  EXPECT_EQ(o[1].as<uint8_t>()[0], 0);
}

TEST(Dropout, SeedOffsetInputAddsToTheSeed) {
  // The per-step offset input gives the mask of attribute seed + offset.
  const int n = 256;
  std::vector<Tensor> a = {out(TDM_F32, {n}), out(TDM_U8, {n})}, b = a;
  const auto ones = f32({n}, std::vector<float>(n, 1.0f));
  EXPECT_RUN_OK(run("dropout", {ones, make(TDM_S64, {}, std::vector<int64_t>{1000})}, a,
                    {attr("p", 0.5), attr("seed", 7)}));
  EXPECT_RUN_OK(run("dropout", {ones}, b, {attr("p", 0.5), attr("seed", 1007)}));
  EXPECT_EQ(a[1].as<uint8_t>(), b[1].as<uint8_t>());
  for (int i = 0; i < n; ++i) ASSERT_EQ(a[1].as<uint8_t>()[size_t(i)], keep(1007, uint64_t(i), 0.5) ? 1 : 0);
}

TEST(Dropout, MaskMatchesFormula) {
  const int n = 1000;
  const double p = 0.3;
  std::vector<Tensor> o = {out(TDM_F32, {n}), out(TDM_U8, {n})};
  EXPECT_RUN_OK(run("dropout", {f32({n}, std::vector<float>(n, 1.0f))}, o, {attr("p", p), attr("seed", 42)}));
  const auto y = o[0].as<float>();
  const auto mask = o[1].as<uint8_t>();
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    const bool k = keep(42, uint64_t(i), p);
    ASSERT_EQ(mask[size_t(i)], k ? 1 : 0) << "element " << i;
    EXPECT_FLOAT_EQ(y[size_t(i)], k ? float(1.0 / 0.7) : 0.0f);
    kept += k;
  }
  EXPECT_NEAR(kept, 700, 60);  // sanity: about 1-p kept
  // p = 0: identity, mask all ones
  EXPECT_RUN_OK(run("dropout", {f32({n}, std::vector<float>(n, 2.0f))}, o, {attr("p", 0.0)}));
  EXPECT_EQ(o[0].as<float>(), std::vector<float>(n, 2.0f));
  EXPECT_EQ(o[1].as<uint8_t>(), std::vector<uint8_t>(n, 1));
}

TEST(Dropout, Grad) {
  // dx = mask ? dy/(1-p) : 0
  std::vector<Tensor> dx = {out(TDM_F32, {2})};
  EXPECT_RUN_OK(run("dropout_grad", {f32({2}, {1, 1}), u8({2}, {1, 0})}, dx, {attr("p", 0.5)}));
  expect_f32(dx[0], {2, 0});
}

TEST(Sgd, PlainWithWeightDecay) {
  // g = grad + 0.1·param = [0.6, -0.8]; param -= 0.1·g → [0.94, 2.08]
  std::vector<Tensor> o = {out(TDM_F32, {2}), absent()};
  EXPECT_RUN_OK(run("sgd_update", {f32({2}, {1, 2}), f32({2}, {0.5f, -1}), f32({}, {0.1f}), absent()}, o,
                    {attr("weight_decay", 0.1)}));
  expect_f32(o[0], {0.94, 2.08});
}

TEST(Sgd, MomentumAndNesterov) {
  // buf = 0.9·[1,1] + [0.5,-1] = [1.4,-0.1]; param -= 0.1·buf → [0.86, 2.01]
  std::vector<Tensor> o = {out(TDM_F32, {2}), out(TDM_F32, {2})};
  const std::vector<Tensor> in = {f32({2}, {1, 2}), f32({2}, {0.5f, -1}), f32({}, {0.1f}), f32({2}, {1, 1})};
  EXPECT_RUN_OK(run("sgd_update", in, o, {attr("momentum", 0.9)}));
  expect_f32(o[0], {0.86, 2.01});
  expect_f32(o[1], {1.4, -0.1});
  // nesterov: g + 0.9·buf = [1.76, -1.09]; param → [0.824, 2.109]
  EXPECT_RUN_OK(run("sgd_update", in, o, {attr("momentum", 0.9), attr("nesterov", 1)}));
  expect_f32(o[0], {0.824, 2.109});
}

TEST(AdamW, OneStepMatchesFormula) {
  // param 1, grad 0.5, lr 0.1, wd 0.01, t = 1:
  // param = 1·(1 - 0.001) = 0.999; m = 0.05; v = 0.001·0.25 = 0.00025
  // m̂ = 0.5, v̂ = 0.25, param -= 0.1·0.5/(0.5 + 1e-8) → 0.899
  std::vector<Tensor> o = {out(TDM_F32, {1}), out(TDM_F32, {1}), out(TDM_F32, {1})};
  EXPECT_RUN_OK(
      run("adamw_update",
          {f32({1}, {1}), f32({1}, {0.5f}), f32({1}, {0}), f32({1}, {0}), f32({}, {0.1f}), s32({}, {1})}, o));
  expect_f32(o[0], {0.899}, 1e-6);
  expect_f32(o[1], {0.05}, 1e-7);
  expect_f32(o[2], {0.00025}, 1e-9);
  // step 0 is an error at launch
  auto r =
      run("adamw_update",
          {f32({1}, {1}), f32({1}, {0.5f}), f32({1}, {0}), f32({1}, {0}), f32({}, {0.1f}), s32({}, {0})}, o);
  EXPECT_EQ(r.status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(r.failed_at, Stage::Launch);
}

TEST(AdamW, InPlaceMatchesOutOfPlace) {
  // param, m, v updated in place (out 0 = in 0, out 1 = in 2, out 2 = in 3);
  // step 2 from m = 0.05, v = 0.00025 (the state after the step above)
  const std::vector<Tensor> in = {f32({2}, {0.899f, -1}),  f32({2}, {0.5f, 0.25f}), f32({2}, {0.05f, 0}),
                                  f32({2}, {0.00025f, 0}), f32({}, {0.1f}),         s32({}, {2})};
  std::vector<Tensor> separate = {out(TDM_F32, {2}), out(TDM_F32, {2}), out(TDM_F32, {2})};
  EXPECT_RUN_OK(run("adamw_update", in, separate));
  std::vector<Tensor> inplace = {out(TDM_F32, {2}), out(TDM_F32, {2}), out(TDM_F32, {2})};
  EXPECT_RUN_OK(run("adamw_update", in, inplace, {}, nullptr, {{0, 0}, {1, 2}, {2, 3}}));
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(inplace[j].as<float>(), separate[j].as<float>()) << "output " << j;
  // m = 0.9·0.05 + 0.1·0.5 = 0.095 for element 0
  EXPECT_NEAR(inplace[1].as<float>()[0], 0.095, 1e-7);
}

TEST(BatchNorm, RunningStatsInPlace) {
  std::vector<Tensor> o = {out(TDM_F32, {2, 1}), out(TDM_F32, {1}), out(TDM_F32, {1}), out(TDM_F32, {1}),
                           out(TDM_F32, {1})};
  EXPECT_RUN_OK(run("batch_norm_train",
                    {f32({2, 1}, {1, 3}), f32({1}, {1}), f32({1}, {0}), f32({1}, {0}), f32({1}, {1})}, o, {},
                    nullptr, {{3, 3}, {4, 4}}));
  expect_f32(o[3], {0.2});
  expect_f32(o[4], {1.1});
}
