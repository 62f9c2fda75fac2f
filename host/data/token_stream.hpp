// A language model's data: one long sequence of token ids, kept in memory
// in the width it was stored with (1 byte for raw text, where a token is a
// byte and the vocabulary 256; 2 or 4 bytes for the uint16/uint32 binary
// files nanoGPT's prepare scripts write as train.bin / val.bin), never
// widened to float. Several streams may share one file's bytes (a
// validation split is the tail of the training file).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "util/result.hpp"

namespace tandem::host::data {

class TokenStream {
 public:
  TokenStream(std::shared_ptr<const std::vector<uint8_t>> bytes, int width, int64_t begin, int64_t end)
      : bytes_(std::move(bytes)), width_(width), begin_(begin), end_(end) {}

  int64_t size() const noexcept { return end_ - begin_; }
  int width() const noexcept { return width_; }
  // Token i of this stream (little-endian, as numpy's tofile writes on x86).
  uint32_t at(int64_t i) const noexcept {
    const uint8_t* p = bytes_->data() + (begin_ + i) * width_;
    if (width_ == 1) return p[0];
    if (width_ == 2) return uint32_t(p[0]) | uint32_t(p[1]) << 8;
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
  }
  // Tokens [begin, end) of this stream as a stream of their own.
  TokenStream slice(int64_t begin, int64_t end) const {
    return TokenStream(bytes_, width_, begin_ + begin, begin_ + end);
  }

 private:
  std::shared_ptr<const std::vector<uint8_t>> bytes_;
  int width_ = 1;
  int64_t begin_ = 0, end_ = 0;
};

// The width of a [data] token_dtype: "u8" 1, "u16" 2, "u32" 4 (0: unknown).
int token_width(const std::string& dtype);

// Reads a token file whole. Errors name the file: missing or unreadable, a
// size that is not a multiple of the width, fewer than context + 1 tokens,
// or a token id >= vocab (with its position). Sets *largest to the largest
// id seen.
Result<TokenStream> read_token_file(const std::string& path, int width, int64_t context, int64_t vocab,
                                    uint32_t* largest);

}  // namespace tandem::host::data
