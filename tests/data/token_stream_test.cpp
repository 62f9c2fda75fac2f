// Token data for language models: files read in their stored width, errors
// that name the file, and the loader's windows (inputs and next-token
// labels, reproducible per epoch, consecutive for evaluation).
#include "data/token_stream.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "data/loader.hpp"

namespace tandem::host::data {
namespace {

std::string write_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}

TEST(TokenStream, BytesAreTokensOfText) {
  const std::string path = write_file("tandem_tokens_text.txt", {'h', 'e', 'l', 'l', 'o', '\n'});
  uint32_t largest = 0;
  auto s = read_token_file(path, 1, 3, 256, &largest);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->size(), 6);
  EXPECT_EQ(s->at(1), uint32_t('e'));
  EXPECT_EQ(largest, uint32_t('o'));
  EXPECT_EQ(s->slice(2, 5).size(), 3);
  EXPECT_EQ(s->slice(2, 5).at(0), uint32_t('l'));
}

TEST(TokenStream, Uint16IsLittleEndianAsNanoGptWritesIt) {
  const std::string path = write_file("tandem_tokens.bin", {0x01, 0x00, 0x34, 0x12, 0xff, 0xc3});
  auto s = read_token_file(path, 2, 2, 50304, nullptr);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->at(0), 1u);
  EXPECT_EQ(s->at(1), 0x1234u);
  EXPECT_EQ(s->at(2), 0xc3ffu);
}

TEST(TokenStream, BadFilesAreErrorsNamingTheFile) {
  const std::string odd = write_file("tandem_tokens_odd.bin", {1, 0, 2});
  auto r = read_token_file(odd, 2, 1, 100, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(odd), std::string::npos);
  EXPECT_NE(r.error().message.find("token_dtype"), std::string::npos) << r.error().message;
  const std::string big = write_file("tandem_tokens_big.bin", {1, 0, 200, 0, 3, 0});
  r = read_token_file(big, 2, 1, 100, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("token 1 is 200"), std::string::npos) << r.error().message;
  r = read_token_file(big, 2, 5, 1000, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("fewer than one window"), std::string::npos) << r.error().message;
  r = read_token_file("/nonexistent/tokens.bin", 1, 1, 256, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, TDM_NOT_FOUND);
  EXPECT_EQ(token_width("u16"), 2);
  EXPECT_EQ(token_width("f32"), 0);
}

Dataset windows_of(int64_t n, int64_t context, int64_t windows, bool random) {
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  for (int64_t i = 0; i < n; ++i) bytes->push_back(uint8_t(i));
  Dataset d;
  d.tokens = std::make_shared<const TokenStream>(bytes, 1, 0, n);
  d.context = context;
  d.sample_shape = {context};
  d.windows = windows;
  d.random_windows = random;
  return d;
}

std::vector<std::shared_ptr<const Batch>> epoch(DataLoader& loader, uint64_t e, int64_t first = 0) {
  loader.start_epoch(e, first);
  std::vector<std::shared_ptr<const Batch>> out;
  while (auto b = loader.next()) out.push_back(b);
  return out;
}

TEST(TokenLoader, WindowsAreInputsAndTheNextTokens) {
  const Dataset d = windows_of(100, 8, 12, true);
  DataLoader loader(d, {.batch_size = 4, .seed = 3, .threads = 2});
  const auto batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 3u);
  for (const auto& b : batches) {
    ASSERT_EQ(b->tokens.size(), 32u);
    ASSERT_EQ(b->labels.size(), 32u);
    EXPECT_TRUE(b->features.empty()) << "token ids are never widened to float";
    for (int64_t i = 0; i < b->size; ++i)
      for (int64_t t = 0; t < 8; ++t) {
        const size_t k = size_t(i * 8 + t);
        EXPECT_EQ(b->labels[k], b->tokens[k] + 1) << "label = the token after the input";
        if (t > 0) {
          EXPECT_EQ(b->tokens[k], b->tokens[k - 1] + 1) << "a window is contiguous";
        }
      }
    EXPECT_LE(b->tokens.back() + 1, 99);
  }
}

TEST(TokenLoader, EpochsDrawOtherWindowsAndAResumeSeesTheSame) {
  const Dataset d = windows_of(1000, 16, 20, true);
  DataLoader loader(d, {.batch_size = 5, .seed = 9, .threads = 3});
  const auto first = epoch(loader, 0), second = epoch(loader, 1), resumed = epoch(loader, 1, 2);
  EXPECT_NE(first[0]->tokens, second[0]->tokens);
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[0]->tokens, second[2]->tokens);
  DataLoader again(d, {.batch_size = 5, .seed = 9, .threads = 1});
  EXPECT_EQ(epoch(again, 0)[3]->tokens, first[3]->tokens) << "any thread count, the same windows";
}

TEST(TokenLoader, EvaluationWindowsAreConsecutive) {
  const Dataset d = windows_of(50, 10, 4, false);
  DataLoader loader(d, {.batch_size = 3, .shuffle = false});
  const auto batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0]->tokens[0], 0);
  EXPECT_EQ(batches[0]->tokens[10], 10);
  EXPECT_EQ(batches[1]->tokens[0], 30);
  EXPECT_EQ(batches[1]->labels.back(), 40);
}

}  // namespace
}  // namespace tandem::host::data
