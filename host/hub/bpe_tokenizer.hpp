// The byte-level BPE of a tokenizer.json, in the stages HF's `tokenizers`
// runs: added tokens are cut out of the text first (never split), the rest
// is normalized (NFC or not at all), cut into pre-tokens (a Split regex,
// GPT-2's ByteLevel regex), each pre-token spelled in the byte-level
// alphabet, and each spelling merged by the rank of its merges. Internal to
// hub/: tokenizer.hpp is the interface.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hub/text_regex.hpp"
#include "hub/tokenizer.hpp"

namespace tandem::host::hub {

// The BPE model: the vocabulary and the merges, ranked by their order.
class BpeModel {
 public:
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> tokens;  // by id; "" where the vocabulary has no id
  struct Merge {
    int32_t rank = 0, merged = 0;  // merged: the id of the two tokens joined
  };
  std::unordered_map<uint64_t, Merge> merges;  // key: left id << 32 | right id
  std::optional<int32_t> unk;
  bool fuse_unk = false, byte_fallback = false;
  bool ignore_merges = false;  // a pre-token in the vocabulary is one token, whatever its merges
  std::string file;            // for messages

  static uint64_t pair(int32_t left, int32_t right) {
    return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
  }

  // Appends the ids of one pre-token (spelled in the byte-level alphabet).
  Result<void> tokenize(std::string_view word, std::vector<int32_t>& out) const;

 private:
  Result<void> spell(std::string_view word, std::vector<int32_t>& symbols) const;
  void merge(std::vector<int32_t>& symbols) const;

  // Pre-tokens repeat (" the", " of"): their ids are kept, up to a bound.
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
  mutable std::mutex cache_mutex_;
};

// How a Split pre-tokenizer keeps what its pattern matches (HF's
// SplitDelimiterBehavior).
enum class SplitBehavior { isolated, removed, merged_with_previous, merged_with_next, contiguous };

struct PreTokenizerStep {
  enum class Kind { split, byte_level } kind = Kind::byte_level;
  std::optional<TextRegex> regex;  // split: its pattern; byte_level: GPT-2's, when use_regex
  SplitBehavior behavior = SplitBehavior::isolated;
  bool add_prefix_space = false;  // byte_level
};

// Cuts a normalized text into pre-tokens, each spelled in the byte-level
// alphabet at the end (a ByteLevel step spells the pieces it is given), and
// passes them to `emit` one by one, in order.
using WordSink = std::function<Result<void>(std::string_view word)>;
Result<void> pre_tokenize(const std::vector<PreTokenizerStep>& steps, std::string_view text,
                          const WordSink& emit);

// An added token as tokenizer.json describes its matching.
struct AddedTokenRule {
  AddedToken token;
  bool lstrip = false, rstrip = false;  // takes in the white space before / after it
  bool single_word = false;             // only where no word character touches it
  bool normalized = false;              // matched in the normalized text, not the raw one
};

// A stretch of text: an added token's id, or text to tokenize (id < 0).
struct TextPiece {
  size_t begin = 0, end = 0;
  int32_t id = -1;
};

// Finds the added tokens of one kind (`normalized`) in `text`: at the
// leftmost place where one starts, the longest. Covers all of `text`.
std::vector<TextPiece> split_added(const std::vector<AddedTokenRule>& rules, bool normalized,
                                   std::string_view text);

class BpeTokenizer : public Tokenizer {
 public:
  BpeModel model;
  std::vector<AddedTokenRule> added;
  bool nfc = false;  // the normalizer
  std::vector<PreTokenizerStep> steps;
  std::vector<std::string> added_contents;  // by id, "" where none

  void set_description(std::string text) { description_ = std::move(text); }
  SpecialTokens& mutable_special() { return special_; }

  Result<std::vector<int32_t>> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int64_t vocab_size() const override;
  std::optional<int32_t> token_id(const std::string& token) const override;

 private:
  Result<void> encode_text(std::string_view text, std::vector<int32_t>& out) const;
};

// What keeps a tokenizer.json from being byte-level BPE ("a Unigram model",
// "a Metaspace pre-tokenizer"), or nothing.
std::optional<std::string> not_byte_level_bpe(const nlohmann::json& j);

// The byte-level BPE of a parsed tokenizer.json (`file`, for messages).
Result<std::unique_ptr<BpeTokenizer>> read_bpe_tokenizer(const nlohmann::json& j, const std::string& file);

}  // namespace tandem::host::hub
