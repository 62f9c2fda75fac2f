// The tensor-core attention's fragment places (plugins/cuda/math/mma_layout.hpp)
// and its choice of kernels (math/attention_path.hpp), on the CPU: the
// places against the m16n8k16 instruction's published layout, and a warp's
// chained products (scores, then probabilities times values, with the
// first product's accumulators reused as the second one's A operand)
// replayed lane by lane against the plain matrix products.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "math/attention_path.hpp"
#include "math/mma_layout.hpp"

namespace mma = tandem::cuda::math::mma;
using tandem::cuda::math::mma_attention_declines;

namespace {

using Matrix = std::vector<std::vector<float>>;

Matrix random_matrix(int rows, int cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Matrix m(static_cast<size_t>(rows), std::vector<float>(static_cast<size_t>(cols)));
  for (auto& row : m)
    for (float& v : row) v = u(rng);
  return m;
}

Matrix product(const Matrix& a, const Matrix& b) {
  Matrix c(a.size(), std::vector<float>(b[0].size(), 0.0f));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < b.size(); ++k)
      for (size_t j = 0; j < b[0].size(); ++j) c[i][j] += a[i][k] * b[k][j];
  return c;
}

// One lane's registers, two elements per 32-bit register (kept as floats
// here: the test is about places, not rounding).
using RegsA = std::array<std::array<float, 2>, 4>;
using RegsB = std::array<std::array<float, 2>, 2>;
using RegsC = std::array<float, 4>;

// What the instruction does with the 32 lanes' registers: gather A and B
// from their places, multiply, scatter into the accumulators' places.
void warp_mma(std::array<RegsC, 32>& c, const std::array<RegsA, 32>& a, const std::array<RegsB, 32>& b) {
  Matrix am(16, std::vector<float>(16)), bm(16, std::vector<float>(8));
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      const mma::Place p = mma::a_place(lane, reg);
      am[size_t(p.row)][size_t(p.col)] = a[size_t(lane)][size_t(reg)][0];
      am[size_t(p.row)][size_t(p.col + 1)] = a[size_t(lane)][size_t(reg)][1];
    }
    for (int reg = 0; reg < 2; ++reg) {
      const mma::Place p = mma::b_place(lane, reg);
      bm[size_t(p.row)][size_t(p.col)] = b[size_t(lane)][size_t(reg)][0];
      bm[size_t(p.row + 1)][size_t(p.col)] = b[size_t(lane)][size_t(reg)][1];
    }
  }
  const Matrix d = product(am, bm);
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const mma::Place p = mma::c_place(lane, i);
      c[size_t(lane)][size_t(i)] += d[size_t(p.row)][size_t(p.col)];
    }
}

// The kernels' loads: A from a row-major tile at (row0, k0); B as the rows of
// a tile (kᵀ from k: B[k][n] = y[n0 + n][k0 + k]) or as it is (B[k][n] = z[k0 + k][n0 + n]).
std::array<RegsA, 32> load_a(const Matrix& x, int row0, int k0) {
  std::array<RegsA, 32> f{};
  for (int lane = 0; lane < 32; ++lane)
    for (int reg = 0; reg < 4; ++reg) {
      const mma::Place p = mma::a_place(lane, reg);
      f[size_t(lane)][size_t(reg)] = {x[size_t(row0 + p.row)][size_t(k0 + p.col)],
                                      x[size_t(row0 + p.row)][size_t(k0 + p.col + 1)]};
    }
  return f;
}
std::array<RegsB, 32> load_b_rows(const Matrix& y, int n0, int k0) {
  std::array<RegsB, 32> f{};
  for (int lane = 0; lane < 32; ++lane)
    for (int reg = 0; reg < 2; ++reg) {
      const mma::Place p = mma::b_place(lane, reg);
      f[size_t(lane)][size_t(reg)] = {y[size_t(n0 + p.col)][size_t(k0 + p.row)],
                                      y[size_t(n0 + p.col)][size_t(k0 + p.row + 1)]};
    }
  return f;
}
std::array<RegsB, 32> load_b_cols(const Matrix& z, int k0, int n0) {
  std::array<RegsB, 32> f{};
  for (int lane = 0; lane < 32; ++lane)
    for (int reg = 0; reg < 2; ++reg) {
      const mma::Place p = mma::b_place(lane, reg);
      f[size_t(lane)][size_t(reg)] = {z[size_t(k0 + p.row)][size_t(n0 + p.col)],
                                      z[size_t(k0 + p.row + 1)][size_t(n0 + p.col)]};
    }
  return f;
}

// The A operand of k-columns [16j, 16j + 16) from the accumulators of the
// 8-column products 2j and 2j + 1, as the kernels' a_from_c builds it.
std::array<RegsA, 32> a_from_c(const std::vector<std::array<RegsC, 32>>& c, int j) {
  std::array<RegsA, 32> f{};
  for (int lane = 0; lane < 32; ++lane)
    for (int reg = 0; reg < 4; ++reg) {
      const RegsC& acc = c[size_t(2 * j + mma::c_tile_of_a_reg(reg))][size_t(lane)];
      const int first = mma::c_first_of_a_reg(reg);
      f[size_t(lane)][size_t(reg)] = {acc[size_t(first)], acc[size_t(first + 1)]};
    }
  return f;
}

}  // namespace

TEST(MmaLayout, PlacesAreThoseOfTheInstructionsPublishedLayout) {
  // Lane 5 is group 1, position 1 in its quad.
  EXPECT_EQ(std::make_pair(mma::a_place(5, 0).row, mma::a_place(5, 0).col), std::make_pair(1, 2));
  EXPECT_EQ(std::make_pair(mma::a_place(5, 1).row, mma::a_place(5, 1).col), std::make_pair(9, 2));
  EXPECT_EQ(std::make_pair(mma::a_place(5, 2).row, mma::a_place(5, 2).col), std::make_pair(1, 10));
  EXPECT_EQ(std::make_pair(mma::a_place(5, 3).row, mma::a_place(5, 3).col), std::make_pair(9, 10));
  EXPECT_EQ(std::make_pair(mma::b_place(5, 0).row, mma::b_place(5, 0).col), std::make_pair(2, 1));
  EXPECT_EQ(std::make_pair(mma::b_place(5, 1).row, mma::b_place(5, 1).col), std::make_pair(10, 1));
  EXPECT_EQ(std::make_pair(mma::c_place(31, 0).row, mma::c_place(31, 0).col), std::make_pair(7, 6));
  EXPECT_EQ(std::make_pair(mma::c_place(31, 3).row, mma::c_place(31, 3).col), std::make_pair(15, 7));
}

TEST(MmaLayout, EveryElementOfEachOperandHasExactlyOnePlace) {
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      const mma::Place p = mma::a_place(lane, reg);
      EXPECT_TRUE(a.insert({p.row, p.col}).second && a.insert({p.row, p.col + 1}).second);
    }
    for (int reg = 0; reg < 2; ++reg) {
      const mma::Place p = mma::b_place(lane, reg);
      EXPECT_TRUE(b.insert({p.row, p.col}).second && b.insert({p.row + 1, p.col}).second);
    }
    for (int i = 0; i < 4; ++i)
      EXPECT_TRUE(c.insert({mma::c_place(lane, i).row, mma::c_place(lane, i).col}).second);
  }
  EXPECT_EQ(a.size(), 256u);
  EXPECT_EQ(b.size(), 128u);
  EXPECT_EQ(c.size(), 128u);
  for (const auto& [row, col] : a) EXPECT_TRUE(row < 16 && col < 16);
  for (const auto& [row, col] : b) EXPECT_TRUE(row < 16 && col < 8);
  for (const auto& [row, col] : c) EXPECT_TRUE(row < 16 && col < 8);
}

// The forward's two products for one warp: s = q·kᵀ over a head dim of 32
// (two k steps) and 32 keys (four 8-column products), then o = s·v with s
// taken from the accumulators as A (two k steps of 16 keys) and v as it is.
TEST(MmaLayout, ChainedProductsOfAWarpMatchThePlainProducts) {
  std::mt19937 rng(7);
  const int D = 32, S = 32, E = 16;
  const Matrix q = random_matrix(16, D, rng), k = random_matrix(S, D, rng), v = random_matrix(S, E, rng);
  std::vector<std::array<RegsC, 32>> s(size_t(S / 8), std::array<RegsC, 32>{});
  for (int kk = 0; kk < D / 16; ++kk)
    for (int j = 0; j < S / 8; ++j)
      warp_mma(s[size_t(j)], load_a(q, 0, 16 * kk), load_b_rows(k, 8 * j, 16 * kk));
  std::vector<std::array<RegsC, 32>> o(size_t(E / 8), std::array<RegsC, 32>{});
  for (int kk = 0; kk < S / 16; ++kk)
    for (int n = 0; n < E / 8; ++n) warp_mma(o[size_t(n)], a_from_c(s, kk), load_b_cols(v, 16 * kk, 8 * n));

  Matrix kt(static_cast<size_t>(D), std::vector<float>(static_cast<size_t>(S)));
  for (int i = 0; i < S; ++i)
    for (int d = 0; d < D; ++d) kt[size_t(d)][size_t(i)] = k[size_t(i)][size_t(d)];
  const Matrix scores = product(q, kt), expected = product(scores, v);
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const mma::Place p = mma::c_place(lane, i);
      for (int j = 0; j < S / 8; ++j)
        EXPECT_NEAR(s[size_t(j)][size_t(lane)][size_t(i)], scores[size_t(p.row)][size_t(8 * j + p.col)],
                    1e-4);
      for (int n = 0; n < E / 8; ++n)
        EXPECT_NEAR(o[size_t(n)][size_t(lane)][size_t(i)], expected[size_t(p.row)][size_t(8 * n + p.col)],
                    1e-4);
    }
}

TEST(AttentionPath, TensorCoresTake16BitDataWithoutDropoutAtHeadDimsOf16To128) {
  EXPECT_EQ(mma_attention_declines(true, 64, 64, 0.0, 9), nullptr);    // GPT-2, Llama: bf16 on an H100
  EXPECT_EQ(mma_attention_declines(true, 128, 128, 0.0, 8), nullptr);  // an A100
  EXPECT_EQ(mma_attention_declines(true, 32, 48, 0.0, 12), nullptr);   // D ≠ E
  EXPECT_STREQ(mma_attention_declines(false, 64, 64, 0.0, 9), "f32 data: its products keep f32 arithmetic");
  EXPECT_NE(mma_attention_declines(true, 64, 64, 0.1, 9), nullptr);  // dropout: the counter mask
  EXPECT_NE(mma_attention_declines(true, 8, 8, 0.0, 9), nullptr);    // not a multiple of 16
  EXPECT_NE(mma_attention_declines(true, 64, 40, 0.0, 9), nullptr);
  EXPECT_NE(mma_attention_declines(true, 256, 256, 0.0, 9), nullptr);  // above 128
  EXPECT_NE(mma_attention_declines(true, 64, 64, 0.0, 7), nullptr);    // Turing: no m16n8k16
}
