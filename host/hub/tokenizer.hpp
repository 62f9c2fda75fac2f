// The tokenizer of a Hugging Face model directory, so that text becomes the
// model's token ids and back (`tandem tokenize`, `tandem generate`).
//
// Two kinds are read: a byte-level BPE in tokenizer.json (GPT-2, Llama 3,
// Qwen2: every byte of the text is a character of a 256-letter alphabet,
// so no text is out of vocabulary) and a SentencePiece model in
// tokenizer.model (Llama 2, Mistral). Their ids are those of HF's
// `tokenizers` (encode with add_special_tokens=False) and of
// `sentencepiece` on the same text: tests/hub/tokenizers.sh checks both. A
// tokenizer.json of another kind (Llama 2's SentencePiece-like BPE with a
// Metaspace pre-tokenizer, WordPiece, Unigram) is read through the
// directory's tokenizer.model when there is one, else refused naming its
// model and pre-tokenizer types.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.hpp"

namespace tandem::host::hub {

// A token matched in the text as a whole before any other tokenization
// (HF's added tokens: <|endoftext|>, chat markers), never split.
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;  // a control token rather than text
};

struct SpecialTokens {
  std::optional<int32_t> bos;
  std::vector<int32_t> eos;  // generation ends after any of them
  // A text given to the model starts with bos (HF's post-processor
  // template, or tokenizer_config.json's add_bos_token).
  bool add_bos = false;
  std::vector<AddedToken> added;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // UTF-8 text to ids, without bos or eos. Errors: text that is not UTF-8
  // (with the byte offset), a character the vocabulary cannot spell.
  virtual Result<std::vector<int32_t>> encode(std::string_view text) const = 0;

  // Ids to text. Ids the vocabulary lacks give nothing (as in HF). The
  // bytes are the concatenation of the tokens': a part of a text may end
  // inside a UTF-8 sequence that the next token completes.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;

  // Ids run from 0 to vocab_size() - 1 (added tokens included).
  virtual int64_t vocab_size() const = 0;

  // The id of a token given as written in the vocabulary ("<s>", "<|endoftext|>").
  virtual std::optional<int32_t> token_id(const std::string& token) const = 0;

  const SpecialTokens& special() const noexcept { return special_; }
  // What was read: "byte-level BPE (DIR/tokenizer.json)".
  const std::string& description() const noexcept { return description_; }

 protected:
  // load_tokenizer completes what the tokenizer file says with the
  // directory's configuration files.
  friend Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& dir);
  SpecialTokens special_;
  std::string description_;
};

// The directory has a tokenizer file this reads (tokenizer.json or tokenizer.model).
bool has_tokenizer_files(const std::string& dir);

// Reads the tokenizer of the Hugging Face model directory `dir`; its bos
// and eos come from the tokenizer file where it says, else from
// tokenizer_config.json, generation_config.json and config.json. Errors
// name the file, what is wrong with it and what to do.
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& dir);

}  // namespace tandem::host::hub
