// The CUDA plugin's deterministic reductions on a GPU (math/column_sum.hpp,
// math/embedding_grad.hpp): the GPU's bits are the CPU schedule's, and a
// second launch writes the same bits. SKIPPED with the plugin's reason where
// no GPU is usable.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "math/column_sum.hpp"
#include "math/embedding_grad.hpp"
#include "plugin_test_support.hpp"

using namespace cudatest;

// layer_norm_grad's dgamma and dbeta over 4096 rows of D = 300 (10 column
// tiles that end mid-warp, 64 row chunks), f32 and bf16.
TEST_F(Gpu, LayerNormGradParamsAreTheFixedOrderSumsBitForBit) {
  const int64_t rows = 4096, D = 300;
  const auto dy = ramp(rows * D, 0.1f), x = ramp(rows * D, 0.3f, 0.5f), gamma = ramp(D, 0.05f, 8.0f);
  const auto mean = ramp(rows, 0.02f), rstd = ramp(rows, 0.02f, 10.0f);
  const mm::ColumnSumPlan plan = mm::column_sum_plan(rows, D);
  ASSERT_GT(plan.chunks, 1);
  for (const tdm_dtype t : {TDM_F32, TDM_BF16}) {
    SCOPED_TRACE(t == TDM_F32 ? "f32" : "bf16");
    const bool f32 = t == TDM_F32;
    const Tensor dy_t = f32 ? Tensor::f32({4, 1024, D}, dy) : bf16({4, 1024, D}, dy);
    const Tensor x_t = f32 ? Tensor::f32({4, 1024, D}, x) : bf16({4, 1024, D}, x);
    const Tensor g_t = f32 ? Tensor::f32({D}, gamma) : bf16({D}, gamma);
    const std::vector<Tensor> in = {dy_t, x_t, g_t, Tensor::f32({4, 1024}, mean),
                                    Tensor::f32({4, 1024}, rstd)};
    std::vector<Tensor> first = {Tensor::empty(t, {4, 1024, D}), Tensor::empty(t, {D}),
                                 Tensor::empty(t, {D})};
    size_t ws = 0;
    ASSERT_EQ(p_->run("layer_norm_grad", {}, in, first, &ws), TDM_OK) << Plugin::last_error();
    EXPECT_EQ(ws, size_t(2 * plan.partials()) * sizeof(float));  // the partials are planned workspace
    std::vector<float> want(size_t(2 * D));
    if (f32) {
      mm::column_sums<2>(
          plan, mm::LayerNormParamTerm<float>{dy.data(), x.data(), mean.data(), rstd.data(), D}, want.data());
    } else {
      const auto dy16 = bf16_values(dy_t), x16 = bf16_values(x_t);
      mm::column_sums<2>(
          plan, mm::LayerNormParamTerm<mm::bf16_t>{dy16.data(), x16.data(), mean.data(), rstd.data(), D},
          want.data());
    }
    const std::vector<float> dgamma(want.begin(), want.begin() + D), dbeta(want.begin() + D, want.end());
    EXPECT_EQ(first[1].bytes, f32 ? stored<float>(dgamma) : stored<mm::bf16_t>(dgamma));
    EXPECT_EQ(first[2].bytes, f32 ? stored<float>(dbeta) : stored<mm::bf16_t>(dbeta));
    // Against sums in double: the order's error bound (about 80 additions
    // deep here, γ < 1e-5) relative to the sum of the terms' magnitudes.
    if (f32)
      for (int64_t j = 0; j < D; ++j) {
        double dg = 0, db = 0, dg_abs = 0, db_abs = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const double d = dy[size_t(r * D + j)];
          const double term = d * (double(x[size_t(r * D + j)]) - mean[size_t(r)]) * rstd[size_t(r)];
          dg += term, db += d, dg_abs += std::fabs(term), db_abs += std::fabs(d);
        }
        EXPECT_NEAR(first[1].floats()[size_t(j)], dg, 1e-5 * dg_abs) << j;
        EXPECT_NEAR(first[2].floats()[size_t(j)], db, 1e-5 * db_abs) << j;
      }
    std::vector<Tensor> again = {Tensor::empty(t, {4, 1024, D}), Tensor::empty(t, {D}),
                                 Tensor::empty(t, {D})};
    ASSERT_EQ(p_->run("layer_norm_grad", {}, in, again), TDM_OK) << Plugin::last_error();
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(again[k].bytes, first[k].bytes) << "output " << k;
  }
}

// rms_norm_grad's dgamma at a transformer's size: 8192 tokens of D = 768.
TEST_F(Gpu, RmsNormGradDgammaIsTheFixedOrderSumBitForBit) {
  const int64_t rows = 8192, D = 768;
  const auto dy = ramp(rows * D, 0.1f), x = ramp(rows * D, 0.3f, 0.5f), gamma = ramp(D, 0.05f, 8.0f);
  const auto rstd = ramp(rows, 0.02f, 10.0f);
  const std::vector<Tensor> in = {Tensor::f32({rows, D}, dy), Tensor::f32({rows, D}, x),
                                  Tensor::f32({D}, gamma), Tensor::f32({rows}, rstd)};
  std::vector<Tensor> first = {Tensor::empty(TDM_F32, {rows, D}), Tensor::empty(TDM_F32, {D})};
  ASSERT_EQ(p_->run("rms_norm_grad", {}, in, first), TDM_OK) << Plugin::last_error();
  std::vector<float> want(static_cast<size_t>(D));
  mm::column_sums<1>(mm::column_sum_plan(rows, D),
                     mm::RmsNormParamTerm<float>{dy.data(), x.data(), rstd.data(), D}, want.data());
  EXPECT_EQ(first[1].bytes, stored<float>(want));
  std::vector<Tensor> again = {Tensor::empty(TDM_F32, {rows, D}), Tensor::empty(TDM_F32, {D})};
  ASSERT_EQ(p_->run("rms_norm_grad", {}, in, again), TDM_OK) << Plugin::last_error();
  EXPECT_EQ(again[1].bytes, first[1].bytes);
}

// The bias gradients: linear's column sum over [N, O], and conv2d's over
// [N, K, P·Q] (runs of 49 summed by warps first).
TEST_F(Gpu, BiasGradientsAreTheFixedOrderSumsBitForBit) {
  const int64_t N = 3000, O = 70, I = 8;
  const auto dy = ramp(N * O, 0.2f, 3.0f), x = ramp(N * I);
  const std::vector<Tensor> in = {Tensor::f32({N, O}, dy), Tensor::f32({N, I}, x)};
  std::vector<Tensor> first = {Tensor::empty(TDM_F32, {O, I}), Tensor::empty(TDM_F32, {O})};
  ASSERT_EQ(p_->run("linear_grad_weight", {}, in, first), TDM_OK) << Plugin::last_error();
  std::vector<float> want(static_cast<size_t>(O));
  mm::channel_sums(mm::channel_sum_plan(N, O, 1), dy.data(), want.data());
  EXPECT_EQ(first[1].bytes, stored<float>(want));
  std::vector<Tensor> again = {Tensor::empty(TDM_F32, {O, I}), Tensor::empty(TDM_F32, {O})};
  ASSERT_EQ(p_->run("linear_grad_weight", {}, in, again), TDM_OK) << Plugin::last_error();
  EXPECT_EQ(again[1].bytes, first[1].bytes);

  const int64_t B = 40, C = 3, K = 6, H = 7;  // 1x1 convolution: P = Q = 7
  const auto cdy = ramp(B * K * H * H, 0.2f, 1.0f), cx = ramp(B * C * H * H);
  std::vector<Tensor> conv = {Tensor::empty(TDM_F32, {K, C, 1, 1}), Tensor::empty(TDM_F32, {K})};
  ASSERT_EQ(p_->run("conv2d_grad_weight", {}, {Tensor::f32({B, K, H, H}, cdy), Tensor::f32({B, C, H, H}, cx)},
                    conv),
            TDM_OK)
      << Plugin::last_error();
  std::vector<float> conv_want(static_cast<size_t>(K));
  mm::channel_sums(mm::channel_sum_plan(B, K, H * H), cdy.data(), conv_want.data());
  EXPECT_EQ(conv[1].bytes, stored<float>(conv_want));
  for (int64_t k = 0; k < K; ++k) {
    double s = 0, a = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < H * H; ++i) {
        const double v = cdy[size_t((b * K + k) * H * H + i)];
        s += v, a += std::fabs(v);
      }
    EXPECT_NEAR(conv[1].floats()[size_t(k)], s, 1e-5 * a);
  }
}

// embedding_grad sums each row's positions in position order: the naive
// loop's bits, with repeated rows, the padding row, out-of-range indices
// and a vocabulary slice.
TEST_F(Gpu, EmbeddingGradIsTheNaiveLoopBitForBit) {
  const int64_t n = 6000, V = 500, D = 70, padding = 15;
  const auto dy = ramp(n * D, 0.3f, 2.0f);
  for (const int64_t start : {-1, 1000}) {
    SCOPED_TRACE(start < 0 ? "whole table" : "vocabulary slice");
    const int64_t shift = start < 0 ? 0 : start;
    std::vector<int32_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = int32_t(((i * 7919) % 97 - 2) * 5 + shift);  // -10..470
    idx[10] = int32_t(shift + V);
    std::vector<float> naive(size_t(V * D), 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = idx[size_t(i)] - shift;
      if (row < 0 || row >= V || row == padding) continue;
      for (int64_t j = 0; j < D; ++j) naive[size_t(row * D + j)] += dy[size_t(i * D + j)];
    }
    const std::vector<Attr> attrs = {Attr::integer("padding_idx", padding),
                                     Attr::integer("vocab_start", start)};
    const std::vector<Tensor> in = {Tensor::f32({6, 1000, D}, dy), Tensor::s32({6, 1000}, idx)};
    std::vector<Tensor> first = {Tensor::empty(TDM_F32, {V, D})};
    size_t ws = 0;
    ASSERT_EQ(p_->run("embedding_grad", attrs, in, first, &ws), TDM_OK) << Plugin::last_error();
    EXPECT_GE(ws, mm::embedding_grad_layout(n, 0).bytes);  // the sort's arrays are planned workspace
    EXPECT_EQ(first[0].bytes, stored<float>(naive));
    std::vector<Tensor> again = {Tensor::empty(TDM_F32, {V, D})};
    ASSERT_EQ(p_->run("embedding_grad", attrs, in, again), TDM_OK) << Plugin::last_error();
    EXPECT_EQ(again[0].bytes, first[0].bytes);
  }
}
