#include "data/loader.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>
#include <set>

#include "data/split.hpp"
#include "data/synthetic.hpp"

namespace tandem::host::data {
namespace {

Dataset small_set(int64_t n) {
  return make_synthetic({.samples = n, .sample_shape = {1, 4, 4}, .classes = 3, .noise = 0.1, .seed = 7});
}

// Every batch of one epoch, concatenated.
std::vector<std::shared_ptr<const Batch>> epoch_batches(DataLoader& loader, uint64_t epoch,
                                                        int64_t first = 0) {
  loader.start_epoch(epoch, first);
  std::vector<std::shared_ptr<const Batch>> out;
  while (auto b = loader.next()) out.push_back(b);
  return out;
}

TEST(DataLoader, EpochVisitsEverySampleOnce) {
  Dataset set = small_set(103);
  for (size_t i = 0; i < set.labels.size(); ++i)
    set.features[i * 16] = static_cast<float>(i);  // tag each sample
  DataLoader loader(set, {.batch_size = 10, .seed = 1, .threads = 3});
  EXPECT_EQ(loader.batches_per_epoch(), 11);
  std::multiset<float> seen;
  for (const auto& b : epoch_batches(loader, 0))
    for (int64_t i = 0; i < b->size; ++i) seen.insert(b->features[static_cast<size_t>(i * 16)]);
  ASSERT_EQ(seen.size(), 103u);
  for (int i = 0; i < 103; ++i) EXPECT_EQ(seen.count(static_cast<float>(i)), 1u);
}

TEST(DataLoader, SameBatchesForAnyThreadCount) {
  Dataset set = small_set(200);
  Transforms aug{.crop_padding = 1, .horizontal_flip = 0.5};
  DataLoader one(set, {.batch_size = 16, .augment = true, .seed = 3, .threads = 1, .transforms = aug});
  DataLoader four(
      set, {.batch_size = 16, .augment = true, .seed = 3, .threads = 4, .prefetch = 2, .transforms = aug});
  auto a = epoch_batches(one, 5), b = epoch_batches(four, 5);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]->features, b[i]->features) << "batch " << i;
    EXPECT_EQ(a[i]->labels, b[i]->labels);
  }
}

TEST(DataLoader, EpochsDifferAndSeedsMatter) {
  Dataset set = small_set(64);
  DataLoader a(set, {.batch_size = 64, .seed = 1}), b(set, {.batch_size = 64, .seed = 2});
  EXPECT_NE(epoch_batches(a, 0)[0]->labels, epoch_batches(a, 1)[0]->labels);
  EXPECT_NE(epoch_batches(a, 0)[0]->labels, epoch_batches(b, 0)[0]->labels);
}

TEST(DataLoader, ResumeMidEpochContinuesExactly) {
  Dataset set = small_set(90);
  DataLoader loader(set, {.batch_size = 8, .seed = 11, .threads = 2});
  auto whole = epoch_batches(loader, 2);
  auto tail = epoch_batches(loader, 2, 5);
  ASSERT_EQ(tail.size(), whole.size() - 5);
  for (size_t i = 0; i < tail.size(); ++i) EXPECT_EQ(tail[i]->features, whole[i + 5]->features);
}

TEST(DataLoader, ShardsUnionIsTheSingleProcessBatch) {
  Dataset set = small_set(128);
  DataLoader single(set, {.batch_size = 32, .seed = 4});
  DataLoader r0(set, {.batch_size = 16, .seed = 4, .shard_rank = 0, .shard_count = 2});
  DataLoader r1(set, {.batch_size = 16, .seed = 4, .shard_rank = 1, .shard_count = 2});
  auto s = epoch_batches(single, 0), a = epoch_batches(r0, 0), b = epoch_batches(r1, 0);
  ASSERT_EQ(s.size(), a.size());
  for (size_t k = 0; k < s.size(); ++k) {
    std::vector<int32_t> joined = a[k]->labels;
    joined.insert(joined.end(), b[k]->labels.begin(), b[k]->labels.end());
    EXPECT_EQ(joined, s[k]->labels);
  }
}

TEST(DataLoader, DropLastAndShortFinalBatch) {
  Dataset set = small_set(50);
  DataLoader keep(set, {.batch_size = 16}), drop(set, {.batch_size = 16, .drop_last = true});
  auto k = epoch_batches(keep, 0);
  EXPECT_EQ(k.size(), 4u);
  EXPECT_EQ(k.back()->size, 2);
  EXPECT_EQ(epoch_batches(drop, 0).size(), 3u);
}

TEST(DataLoader, AbandonedEpochShutsDownCleanly) {
  Dataset set = small_set(1000);
  DataLoader loader(set, {.batch_size = 4, .threads = 3, .prefetch = 2});
  loader.start_epoch(0);
  ASSERT_NE(loader.next(), nullptr);
  loader.start_epoch(1);  // restarts while workers wait on the bounded queue
  ASSERT_NE(loader.next(), nullptr);
  EXPECT_GE(loader.wait_seconds(), 0.0);
}

TEST(Split, ValidationPartIsDisjointAndSeeded) {
  Dataset set = small_set(100);
  for (size_t i = 0; i < set.labels.size(); ++i) set.features[i * 16] = static_cast<float>(i);
  auto [train, val] = split_validation(set, 0.2, 9);
  EXPECT_EQ(train.size(), 80);
  EXPECT_EQ(val.size(), 20);
  std::set<float> t, v;
  for (int64_t i = 0; i < train.size(); ++i) t.insert(train.value(i, 0));
  for (int64_t i = 0; i < val.size(); ++i) v.insert(val.value(i, 0));
  for (float x : v) EXPECT_EQ(t.count(x), 0u);
  auto [train2, val2] = split_validation(set, 0.2, 9);
  EXPECT_EQ(val.features, val2.features);
}

TEST(Synthetic, DeterministicPerSeed) {
  EXPECT_EQ(small_set(10).features, small_set(10).features);
  EXPECT_NE(make_synthetic({.seed = 1}).features, make_synthetic({.seed = 2}).features);
}

// Token mode (synthetic_vocab): whole ids in the vocabulary, most of a
// sample's tokens among its class's 64 keywords, the rest anywhere.
TEST(Synthetic, TokensComeFromTheVocabularyAndMostlyFromTheClassKeywords) {
  const Dataset set = make_synthetic(
      {.samples = 400, .sample_shape = {32}, .classes = 4, .noise = 0.25, .seed = 5, .vocabulary = 10000});
  size_t keyword = 0;
  for (int64_t i = 0; i < set.size(); ++i) {
    const int32_t label = set.labels[static_cast<size_t>(i)];
    for (int64_t j = 0; j < 32; ++j) {
      const float x = set.features[static_cast<size_t>(i * 32 + j)];
      ASSERT_EQ(x, std::floor(x));
      ASSERT_GE(x, 0.0f);
      ASSERT_LT(x, 10000.0f);
      keyword += x >= label * 2500.0f && x < label * 2500.0f + 64;
    }
  }
  const double share = static_cast<double>(keyword) / (400.0 * 32);
  EXPECT_NEAR(share, 0.75, 0.03) << "noise 0.25: a quarter of the tokens are drawn from the whole vocabulary";
}

}  // namespace
}  // namespace tandem::host::data
