// The all-gather of host bytes through a device buffer
// (host/train/staged_gather.hpp), piece by piece: here the "device" is a
// plain buffer of the size the function is given, and the gather plays
// every rank, so that each rank's bytes are known and checked where they
// land.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "train/staged_gather.hpp"

namespace tandem::host::train {
namespace {

// Rank r's element i.
float value(int rank, size_t i) {
  return float(rank) * 1000.0f + float(i);
}

// `elements` f32 per rank gathered over `world` ranks by rank `me`, in
// pieces of `piece` bytes.
std::vector<float> gather(int world, int me, size_t elements, size_t piece) {
  std::vector<float> mine(elements), all(elements * size_t(world), -1.0f);
  for (size_t i = 0; i < elements; ++i) mine[i] = value(me, i);
  std::vector<char> device((size_t(world) + 1) * piece);
  const auto inside = [&](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    return c >= device.data() && c + n <= device.data() + device.size();
  };
  size_t at = 0;  // the element the next piece begins with
  const StagingCalls calls{
      [&](void* dst, const void* src, size_t n) -> Result<void> {
        EXPECT_TRUE(inside(dst, n));
        std::memcpy(dst, src, n);
        return {};
      },
      [&](void* dst, const void* src, size_t n) -> Result<void> {
        EXPECT_TRUE(inside(src, n));
        std::memcpy(dst, src, n);
        return {};
      },
      [&](const void* send, void* receive, size_t n) -> Result<void> {
        EXPECT_TRUE(inside(send, n));
        EXPECT_TRUE(inside(receive, n * size_t(world)));
        std::vector<float> piece_of(n / sizeof(float));
        std::memcpy(piece_of.data(), send, n);
        for (size_t j = 0; j < piece_of.size(); ++j) EXPECT_EQ(piece_of[j], value(me, at + j));
        for (int r = 0; r < world; ++r)
          for (size_t j = 0; j < piece_of.size(); ++j) {
            const float v = value(r, at + j);
            std::memcpy(static_cast<char*>(receive) + size_t(r) * n + j * sizeof(float), &v, sizeof v);
          }
        at += piece_of.size();
        return {};
      },
  };
  auto done = gather_in_pieces(mine.data(), all.data(), elements * sizeof(float), world, sizeof(float),
                               device.data(), piece, calls);
  EXPECT_TRUE(done.ok()) << (done.ok() ? "" : done.error().message);
  EXPECT_EQ(at, elements);
  return all;
}

TEST(StagedGather, EveryRanksBytesLandInItsBlockWhateverThePieces) {
  for (size_t piece : {size_t(4), size_t(12), size_t(40), size_t(64)}) {
    const std::vector<float> all = gather(3, 1, 10, std::min<size_t>(piece, 40));
    for (int r = 0; r < 3; ++r)
      for (size_t i = 0; i < 10; ++i) EXPECT_EQ(all[size_t(r) * 10 + i], value(r, i)) << "piece " << piece;
  }
}

TEST(StagedGather, APieceHoldsWholeElementsWithinItsLimit) {
  EXPECT_EQ(staging_piece(40, size_t(16) << 20, 4), 40u);  // all at once
  EXPECT_EQ(staging_piece(size_t(100) << 20, size_t(16) << 20, 4), size_t(16) << 20);
  EXPECT_EQ(staging_piece(1000, 10, 8), 8u);  // whole elements
  EXPECT_EQ(staging_piece(1000, 3, 8), 8u);   // at least one
}

TEST(StagedGather, APieceThatWouldSplitAnElementIsRefused) {
  std::vector<char> buffer(64);
  float send[4] = {}, receive[8] = {};
  auto done =
      gather_in_pieces(send, receive, sizeof send, 2, sizeof(float), buffer.data(), 6, StagingCalls{});
  ASSERT_FALSE(done.ok());
  EXPECT_NE(done.error().message.find("split an element"), std::string::npos) << done.error().message;
}

}  // namespace
}  // namespace tandem::host::train
