// The schedules of the CUDA backend's deterministic reductions, on the CPU:
// the column sums behind the norm and bias gradients (math/column_sum.hpp),
// embedding_grad's sorted runs (math/embedding_grad.hpp) and how
// reduce_sum splits a sum over blocks (math/reduce_plan.hpp). How the rows
// are chunked, the order of every addition (cases where another order
// gives other bits), a simulation of the kernels' grid that must give the
// same bits, and the error bound the order guarantees against sums in
// double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "math/column_sum.hpp"
#include "math/embedding_grad.hpp"
#include "math/reduce_plan.hpp"

namespace m = tandem::cuda::math;

namespace {

std::vector<float> noise(size_t n, uint32_t seed, float scale = 1.0f, float shift = 0.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(gen) * scale + shift;
  return v;
}

uint32_t bits(float v) {
  uint32_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// The two kernels of ops/column_sum.cuh as loops over their grid: stage 1
// block (tile, chunk), thread (x, y) stores its lane sums in shared memory,
// thread row 0 folds them into partials[s][chunk][j]; stage 2 thread t folds
// column t's partials.
template <int K, class Term>
std::vector<float> simulate_grid(const m::ColumnSumPlan& p, const Term& term) {
  std::vector<float> partials(size_t(K * p.chunks * p.cols), std::nanf(""));
  for (int64_t chunk = 0; chunk < p.chunks; ++chunk)
    for (int64_t tile = 0; tile < p.tiles(); ++tile) {
      float lanes[K][m::kRowLanes][m::kColumnTile];
      for (int y = 0; y < m::kRowLanes; ++y)
        for (int x = 0; x < m::kColumnTile; ++x) {
          const int64_t j = tile * m::kColumnTile + x;
          float acc[K] = {};
          if (j < p.cols) m::lane_sums<K>(p, chunk, y, j, term, acc);
          for (int s = 0; s < K; ++s) lanes[s][y][x] = acc[s];
        }
      for (int x = 0; x < m::kColumnTile; ++x) {
        const int64_t j = tile * m::kColumnTile + x;
        if (j >= p.cols) continue;
        for (int s = 0; s < K; ++s)
          partials[size_t((s * p.chunks + chunk) * p.cols + j)] =
              m::fold(&lanes[s][0][x], m::kRowLanes, m::kColumnTile);
      }
    }
  std::vector<float> out(size_t(K * p.cols));
  for (int64_t t = 0; t < K * p.cols; ++t) {
    const int64_t s = t / p.cols, j = t % p.cols;
    out[size_t(t)] = m::fold(&partials[size_t(s * p.chunks * p.cols + j)], p.chunks, p.cols);
  }
  return out;
}

// Longest chain of additions behind one column's sum: a lane's rows, the
// fold of the lanes, the fold of the chunks, plus the rounding of a term.
// Recursive summation of m terms is within γ_m = m·u / (1 − m·u) of the
// exact sum, relative to Σ|terms|.
double gamma_bound(const m::ColumnSumPlan& p, int term_roundings) {
  const double depth =
      double((p.chunk_rows + m::kRowLanes - 1) / m::kRowLanes + m::kRowLanes + p.chunks + term_roundings);
  const double u = std::ldexp(1.0, -24);
  return depth * u / (1.0 - depth * u);
}

}  // namespace

TEST(ColumnSumPlan, SplitsRowsIntoWholeChunksOfWholeLanes) {
  for (int64_t rows : {0, 1, 7, 8, 9, 63, 64, 65, 100, 1000, 8192, 100000})
    for (int64_t cols : {1, 31, 32, 33, 768, 4096, 50257}) {
      const m::ColumnSumPlan p = m::column_sum_plan(rows, cols);
      SCOPED_TRACE(testing::Message() << rows << " x " << cols);
      EXPECT_GE(p.chunks, 1);
      EXPECT_LE(p.chunks, m::kColumnSumBlocks);  // grid y stays far below 65535
      EXPECT_GT(p.chunk_rows, 0);
      EXPECT_EQ(p.chunk_rows % m::kRowLanes, 0);
      EXPECT_GE(p.chunks * p.chunk_rows, rows);  // every row in a chunk
      if (rows > 0) {
        EXPECT_LT(p.begin(p.chunks - 1), rows) << "an empty chunk";
      }
      EXPECT_EQ(p.end(p.chunks - 1), rows);
      if (rows >= m::kMinChunkRows) {
        EXPECT_GE(p.chunk_rows, m::kMinChunkRows);
      }
      // Splitting reaches the target unless the rows run out first.
      const int64_t splittable = std::max<int64_t>(1, rows / m::kMinChunkRows);
      EXPECT_GE(2 * p.tiles() * p.chunks, std::min(m::kColumnSumBlocks, p.tiles() * splittable));
    }
}

TEST(ColumnSumPlan, TransformerSizes) {
  // 8192 tokens: 24 tiles of D = 768 get 86 chunks of 96 rows (2064 blocks),
  // 128 tiles of D = 4096 get 16 chunks of 512 rows; a vocabulary-wide
  // dbias (50257 columns) already has 1571 tiles and stays in 2 chunks.
  const m::ColumnSumPlan a = m::column_sum_plan(8192, 768);
  EXPECT_EQ(a.chunks, 86);
  EXPECT_EQ(a.chunk_rows, 96);
  const m::ColumnSumPlan b = m::column_sum_plan(8192, 4096);
  EXPECT_EQ(b.chunks, 16);
  EXPECT_EQ(b.chunk_rows, 512);
  EXPECT_EQ(m::column_sum_plan(8192, 50257).chunks, 2);
  // The partials stage 2 reads back: about 1 % of the rows stage 1 reads at D = 768.
  EXPECT_EQ(a.partials(), 86 * 768);
}

TEST(ColumnSumOrder, LanesTakeEveryEighthRow) {
  // One chunk of 16 rows: lane 0 adds rows 0 and 8, lane 1 rows 1 and 9.
  // Lane 0 cancels to 0 and lane 1 holds 1, so the sum is 1; added row by
  // row, 1e8 + 1 rounds back to 1e8 and the sum would be 0.
  std::vector<float> v(16, 0.0f);
  v[0] = 1e8f, v[8] = -1e8f, v[1] = 1.0f;
  const m::ColumnSumPlan p = m::column_sum_plan(16, 1);
  ASSERT_EQ(p.chunks, 1);
  float out = -1;
  m::column_sums<1>(p, m::PlainTerm<float>{v.data(), 1}, &out);
  EXPECT_EQ(out, 1.0f);
  float naive = 0;
  for (float x : v) naive += x;
  EXPECT_EQ(naive, 0.0f) << "the case no longer tells the orders apart";
}

TEST(ColumnSumOrder, ChunksAreFoldedInOrderAfterTheirLanes) {
  // 128 rows in one column: 2 chunks of 64. Chunk 1's lanes 0 and 1 hold
  // -1e8 and 1, which fold to -1e8; chunk 0 holds 1e8: the sum is 0, where
  // row order (1e8 - 1e8 + 1) would give 1.
  std::vector<float> v(128, 0.0f);
  v[0] = 1e8f, v[64] = -1e8f, v[65] = 1.0f;
  const m::ColumnSumPlan p = m::column_sum_plan(128, 1);
  ASSERT_EQ(p.chunks, 2);
  ASSERT_EQ(p.chunk_rows, 64);
  float out = -1;
  m::column_sums<1>(p, m::PlainTerm<float>{v.data(), 1}, &out);
  EXPECT_EQ(out, 0.0f);
  float naive = 0;
  for (float x : v) naive += x;
  EXPECT_EQ(naive, 1.0f) << "the case no longer tells the orders apart";
}

TEST(ColumnSumOrder, SimulatedGridGivesTheSameBits) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{130, 33}, {1000, 77}, {4096, 96}, {8192, 40}}) {
    SCOPED_TRACE(testing::Message() << rows << " x " << cols);
    const m::ColumnSumPlan p = m::column_sum_plan(rows, cols);
    const auto dy = noise(size_t(rows * cols), 1), x = noise(size_t(rows * cols), 2, 3.0f, 0.5f);
    const auto mean = noise(size_t(rows), 3, 0.5f), rstd = noise(size_t(rows), 4, 0.4f, 1.0f);
    const m::LayerNormParamTerm<float> ln{dy.data(), x.data(), mean.data(), rstd.data(), cols};
    std::vector<float> want(size_t(2 * cols));
    m::column_sums<2>(p, ln, want.data());
    const auto got = simulate_grid<2>(p, ln);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(bits(got[i]), bits(want[i])) << i;

    std::vector<m::bf16_t> dy16(dy.size()), x16(x.size());
    for (size_t i = 0; i < dy.size(); ++i)
      dy16[i] = m::from_float<m::bf16_t>(dy[i]), x16[i] = m::from_float<m::bf16_t>(x[i]);
    const m::RmsNormParamTerm<m::bf16_t> rms{dy16.data(), x16.data(), rstd.data(), cols};
    std::vector<float> want_rms(static_cast<size_t>(cols));
    m::column_sums<1>(p, rms, want_rms.data());
    const auto got_rms = simulate_grid<1>(p, rms);
    for (size_t i = 0; i < want_rms.size(); ++i) ASSERT_EQ(bits(got_rms[i]), bits(want_rms[i])) << i;
  }
}

TEST(ColumnSumAccuracy, WithinTheBoundOfItsOrder) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{8192, 64}, {3000, 50}, {50, 300}}) {
    SCOPED_TRACE(testing::Message() << rows << " x " << cols);
    const m::ColumnSumPlan p = m::column_sum_plan(rows, cols);
    // Mostly-cancelling data: a shift of 10 in dy against a mean of zero.
    const auto dy = noise(size_t(rows * cols), 5, 1.0f, 10.0f), x = noise(size_t(rows * cols), 6, 2.0f);
    const auto mean = noise(size_t(rows), 7, 0.1f), rstd = noise(size_t(rows), 8, 0.5f, 1.0f);
    std::vector<float> got(size_t(2 * cols));
    m::column_sums<2>(p, m::LayerNormParamTerm<float>{dy.data(), x.data(), mean.data(), rstd.data(), cols},
                      got.data());
    const double g = gamma_bound(p, 3);
    EXPECT_LT(g, 1e-5);
    for (int64_t j = 0; j < cols; ++j) {
      double dg = 0, db = 0, dg_abs = 0, db_abs = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const double d = dy[size_t(r * cols + j)];
        const double t = d * (double(x[size_t(r * cols + j)]) - mean[size_t(r)]) * rstd[size_t(r)];
        dg += t, dg_abs += std::fabs(t), db += d, db_abs += std::fabs(d);
      }
      EXPECT_LE(std::fabs(got[size_t(j)] - dg), g * dg_abs) << j;
      EXPECT_LE(std::fabs(got[size_t(cols + j)] - db), g * db_abs) << j;
    }
  }
}

TEST(ChannelSum, RunsFoldAsAButterfly) {
  // Lanes 0, 1 and 16 hold 1e8, -1e8 and 1. The butterfly adds lane 16 to
  // lane 0 first (1e8 + 1 = 1e8 in f32), then lane 1: 0. Lane by lane it
  // would be 1.
  std::vector<float> run(32, 0.0f);
  run[0] = 1e8f, run[1] = -1e8f, run[16] = 1.0f;
  EXPECT_EQ(m::warp_row_sum(run.data(), 32), 0.0f);
  // Each lane first adds its own elements, 32 apart: lane 0 cancels.
  std::vector<float> long_run(64, 0.0f);
  long_run[0] = 1e8f, long_run[32] = -1e8f, long_run[16] = 1.0f;
  EXPECT_EQ(m::warp_row_sum(long_run.data(), 64), 1.0f);
  EXPECT_EQ(m::warp_row_sum(long_run.data(), 0), 0.0f);
}

TEST(ChannelSum, WorkspaceHoldsRunSumsThenPartials) {
  const m::ChannelSumPlan linear = m::channel_sum_plan(8192, 768, 1);
  EXPECT_EQ(linear.row_sums(), 0);
  EXPECT_EQ(linear.workspace_bytes(), size_t(86 * 768 * 4));
  const m::ChannelSumPlan conv = m::channel_sum_plan(32, 64, 56 * 56);
  EXPECT_EQ(conv.row_sums(), 32 * 64);
  EXPECT_EQ(conv.columns.rows, 32);
  EXPECT_EQ(conv.workspace_bytes(), size_t((32 * 64 + conv.columns.partials()) * 4));
  EXPECT_EQ(m::channel_sum_plan(5, 0, 7).workspace_bytes(), 0u);
}

TEST(ChannelSum, MatchesSumsInDoubleForBothLayouts) {
  for (int64_t inner : {1, 5, 49, 100}) {
    const int64_t outer = 300, channels = 20;
    const auto dy = noise(size_t(outer * channels * inner), 9, 1.0f, 0.25f);
    const m::ChannelSumPlan p = m::channel_sum_plan(outer, channels, inner);
    std::vector<float> got(static_cast<size_t>(channels));
    m::channel_sums(p, dy.data(), got.data());
    for (int64_t c = 0; c < channels; ++c) {
      double s = 0, a = 0;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const double v = dy[size_t((o * channels + c) * inner + i)];
          s += v, a += std::fabs(v);
        }
      // A run's warp sum adds its depth (inner/32 + 5) to the column sum's.
      const double g = gamma_bound(p.columns, int((inner + 31) / 32 + 5));
      EXPECT_LE(std::fabs(got[size_t(c)] - s), g * a) << "inner " << inner << " channel " << c;
    }
  }
}

TEST(EmbeddingGradSchedule, KeysNameRowsOrTheSentinel) {
  EXPECT_EQ(m::embedding_sentinel(50257), 50257u);
  EXPECT_EQ(m::embedding_key_bits(50257), 16);  // 50257 < 2^16
  EXPECT_EQ(m::embedding_key_bits(65536), 17);  // the sentinel itself must sort last
  EXPECT_EQ(m::embedding_key_bits(1), 1);
  EXPECT_EQ(m::embedding_sentinel(int64_t(1) << 40), uint32_t(1) << 31);
  EXPECT_EQ(m::embedding_key_bits(uint32_t(1) << 31), 32);
  const uint32_t s = 10;
  EXPECT_EQ(m::embedding_key(3, 0, 10, -1, s), 3u);
  EXPECT_EQ(m::embedding_key(-1, 0, 10, -1, s), s);  // out of range: adds nothing
  EXPECT_EQ(m::embedding_key(10, 0, 10, -1, s), s);
  EXPECT_EQ(m::embedding_key(3, 0, 10, 3, s), s);        // the padding row
  EXPECT_EQ(m::embedding_key(103, 100, 10, -1, s), 3u);  // a vocabulary slice from 100
  EXPECT_EQ(m::embedding_key(99, 100, 10, -1, s), s);
  EXPECT_EQ(m::embedding_key(103, 100, 10, 3, s), s);  // padding in the slice's own rows
}

TEST(EmbeddingGradSchedule, LowerBoundFindsEachRun) {
  const std::vector<uint32_t> keys = {0, 0, 2, 2, 2, 5, 9, 9};
  const auto lb = [&](uint32_t v) { return m::key_lower_bound(keys.data(), int64_t(keys.size()), v); };
  EXPECT_EQ(lb(0), 0);
  EXPECT_EQ(lb(1), 2);
  EXPECT_EQ(lb(2), 2);
  EXPECT_EQ(lb(3), 5);
  EXPECT_EQ(lb(9), 6);
  EXPECT_EQ(lb(10), 8);
  EXPECT_EQ(m::key_lower_bound(keys.data(), 0, 4), 0);
}

TEST(EmbeddingGradSchedule, RunsEndAtTheNextKey) {
  const std::vector<uint32_t> keys = {0, 0, 2, 2, 2, 5};
  EXPECT_EQ(m::run_end(keys.data(), 6, 0, 0), 2);
  EXPECT_EQ(m::run_end(keys.data(), 6, 2, 1), 2);  // no row 1: an empty run
  EXPECT_EQ(m::run_end(keys.data(), 6, 2, 2), 5);
  EXPECT_EQ(m::run_end(keys.data(), 6, 5, 5), 6);
}

TEST(EmbeddingGradSchedule, RowGroupsSpreadTheTableOverAbout2048Blocks) {
  EXPECT_EQ(m::embedding_rows_per_block(0), 1);
  EXPECT_EQ(m::embedding_rows_per_block(1000), 1);
  EXPECT_EQ(m::embedding_rows_per_block(50257), 25);  // 2011 blocks
  for (int64_t V : {1, 2048, 2049, 50257, 1000000}) {
    const int64_t g = m::embedding_rows_per_block(V), blocks = (V + g - 1) / g;
    EXPECT_LE(blocks, 2048) << V;
    EXPECT_GT(blocks * 2, std::min<int64_t>(V, 2048)) << V;
  }
}

TEST(EmbeddingGradSchedule, WorkspaceRegionsAreAlignedAndDisjoint) {
  const m::EmbeddingGradLayout l = m::embedding_grad_layout(8193, 1000);
  const size_t array = (8193 * 4 + 255) / 256 * 256;
  const size_t starts[] = {l.keys_in, l.keys_out, l.positions_in, l.positions_out, l.sort};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(starts[i] % 256, 0u);
    if (i > 0) {
      EXPECT_GE(starts[i], starts[i - 1] + array);
    }
  }
  EXPECT_GE(l.bytes, l.sort + 1000);
  EXPECT_EQ(m::embedding_grad_layout(0, 0).bytes, 0u);
}

TEST(EmbeddingGradSchedule, SortedRunsAddWhatTheNaiveLoopAdds) {
  // Repeated rows, the padding row, indices out of range both ways, and a
  // vocabulary slice: the runs give the naive position-order loop's bits.
  const int64_t n = 4000, V = 5000, D = 37;  // 3 rows per group of the kernel
  for (int64_t shift : {0, 1000}) {
    std::mt19937 gen(11);
    std::uniform_int_distribution<int32_t> pick(-5, int32_t(V) + 5);
    std::vector<int32_t> idx(static_cast<size_t>(n));
    // Rows 0, 97, ..., 3783, ~50 times each, spread over many row groups,
    // and as many negative ones.
    for (int32_t& i : idx) i = pick(gen) % 40 * 97 + int32_t(shift);
    idx[7] = -3;
    idx[8] = int32_t(shift + V);
    const auto dy = noise(size_t(n * D), 12, 1.0f, 0.5f);
    const int64_t padding = 4 * 97;
    std::vector<float> got(size_t(V * D), std::nanf("")), naive(size_t(V * D), 0.0f);
    m::embedding_grad_sums(idx.data(), n, dy.data(), V, D, shift, padding, got.data());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = idx[size_t(i)] - shift;
      if (row < 0 || row >= V || row == padding) continue;
      for (int64_t j = 0; j < D; ++j) naive[size_t(row * D + j)] += dy[size_t(i * D + j)];
    }
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(bits(got[i]), bits(naive[i])) << "shift " << shift << " at " << i;
    for (int64_t j = 0; j < D; ++j) EXPECT_EQ(got[size_t(padding * D + j)], 0.0f);
  }
}

// Every element of an output in exactly one chunk, chunks in order, whole
// warps of threads per chunk, and never more blocks than the target unless
// there are more outputs than that.
TEST(ReducePlan, ChunksCoverEveryElementOnceInOrder) {
  for (int64_t outputs : {1, 3, 100, 1024, 5000})
    for (int64_t count : {0, 1, 255, 4096, 4097, 70000, 147456, 10000000}) {
      const m::ReducePlan p = m::reduce_plan(outputs, count);
      SCOPED_TRACE(std::to_string(outputs) + " outputs of " + std::to_string(count));
      ASSERT_GE(p.splits, 1);
      EXPECT_EQ(p.chunk % m::kReduceThreads, 0);
      EXPECT_EQ(p.begin(0), 0);
      EXPECT_EQ(p.end(p.splits - 1), count);
      for (int64_t s = 1; s < p.splits; ++s) EXPECT_EQ(p.begin(s), p.end(s - 1));
      for (int64_t s = 0; s < p.splits; ++s) EXPECT_LT(p.begin(s), std::max<int64_t>(p.end(s), 1));
      if (p.splits > 1) {
        EXPECT_GE(p.chunk, m::kMinReduceChunk);
        EXPECT_LE(outputs * p.splits, m::kReduceBlocks);
        EXPECT_EQ(p.partials(), outputs * p.splits);
      } else {
        EXPECT_EQ(p.partials(), 0);
      }
    }
}

// A whole-tensor sum (a weight gradient of a GPT block, a large embedding
// table) runs on many blocks; a sum per row of an activation keeps one
// block per output and needs no second stage.
TEST(ReducePlan, WholeTensorSumsSpreadAndRowSumsStayWhole) {
  EXPECT_EQ(m::reduce_plan(1, 768 * 192).splits, 768 * 192 / m::kMinReduceChunk);
  EXPECT_EQ(m::reduce_plan(1, int64_t(1) << 26).splits, m::kReduceBlocks);
  EXPECT_EQ(m::reduce_plan(1, 1000).splits, 1);
  EXPECT_EQ(m::reduce_plan(4096, 768).splits, 1);
  EXPECT_EQ(m::reduce_plan(3, 70000).splits, 17);
}

// The reduced axes as one run of equal steps where they collapse: trailing
// axes step 1, leading axes step over the kept elements, interleaved axes not.
TEST(ReducePlan, ReducedAxesCollapseOnlyIntoOneRunOfEqualSteps) {
  const int64_t whole_dims[] = {4, 5, 6}, whole_strides[] = {30, 6, 1};
  EXPECT_EQ(m::collapsed_step(whole_dims, whole_strides, 3), 1);
  const int64_t leading_dims[] = {4, 5}, leading_strides[] = {30, 6};  // axes 0, 1 of [4, 5, 6]
  EXPECT_EQ(m::collapsed_step(leading_dims, leading_strides, 2), 6);
  const int64_t apart_dims[] = {4, 6}, apart_strides[] = {30, 1};  // axes 0, 2 of [4, 5, 6]
  EXPECT_EQ(m::collapsed_step(apart_dims, apart_strides, 2), 0);
  const int64_t one_dims[] = {4, 1, 6}, one_strides[] = {6, 6, 1};  // a size-1 axis between
  EXPECT_EQ(m::collapsed_step(one_dims, one_strides, 3), 1);
  EXPECT_EQ(m::collapsed_step(nullptr, nullptr, 0), 1);
}
