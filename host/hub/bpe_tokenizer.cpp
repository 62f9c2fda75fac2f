#include "hub/bpe_tokenizer.hpp"

#include <algorithm>

#include "hub/text_unicode.hpp"

namespace tandem::host::hub {

// Text between added tokens: normalized, then searched for the added
// tokens that match normalized text, then pre-tokenized and merged.
Result<void> BpeTokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  std::string normal;
  if (nfc) {
    auto n = hub::nfc(text);
    if (!n) return n.error();
    normal = std::move(*n);
  } else {
    normal = std::string(text);
  }
  const std::string_view text_view(normal);
  const auto merge = [&](std::string_view word) { return model.tokenize(word, out); };
  for (const TextPiece& piece : split_added(added, true, normal)) {
    if (piece.id >= 0) {
      out.push_back(piece.id);
      continue;
    }
    if (auto r = pre_tokenize(steps, text_view.substr(piece.begin, piece.end - piece.begin), merge); !r)
      return r.error().message.rfind(model.file, 0) == 0
                 ? r.error()
                 : make_error(model.file + ": pre_tokenizer: " + r.error().message, r.error().status);
  }
  return {};
}

Result<std::vector<int32_t>> BpeTokenizer::encode(std::string_view text) const {
  if (auto bad = invalid_utf8_at(text))
    return make_error("the text is not UTF-8 (byte " + std::to_string(*bad) +
                          " does not start or continue a character); convert it first, e.g. with iconv "
                          "-f LATIN1 -t UTF-8",
                      TDM_INVALID_ARGUMENT);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  for (const TextPiece& piece : split_added(added, false, text)) {
    if (piece.id >= 0) {
      ids.push_back(piece.id);
    } else if (auto r = encode_text(text.substr(piece.begin, piece.end - piece.begin), ids); !r) {
      return r.error();
    }
  }
  return ids;
}

// Each token's characters back to bytes through the byte-level alphabet; a
// token with a character outside it (an added token such as "<|日本|>")
// stands for its own UTF-8, as in HF's ByteLevel decoder.
std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out, bytes;
  for (int32_t id : ids) {
    if (id < 0) continue;
    const std::string* token = nullptr;
    if (size_t(id) < added_contents.size() && !added_contents[size_t(id)].empty())
      token = &added_contents[size_t(id)];
    else if (size_t(id) < model.tokens.size())
      token = &model.tokens[size_t(id)];
    if (token == nullptr) continue;
    bytes.clear();
    bool alphabet = true;
    for (size_t i = 0; i < token->size() && alphabet;
         i += utf8_length(static_cast<unsigned char>((*token)[i]))) {
      auto b = char_byte(utf8_decode(*token, i));
      if (b)
        bytes += char(*b);
      else
        alphabet = false;
    }
    out += alphabet ? bytes : *token;
  }
  return out;
}

int64_t BpeTokenizer::vocab_size() const {
  return int64_t(std::max(model.tokens.size(), added_contents.size()));
}

std::optional<int32_t> BpeTokenizer::token_id(const std::string& token) const {
  for (const AddedTokenRule& r : added)
    if (r.token.content == token) return r.token.id;
  if (auto it = model.vocab.find(token); it != model.vocab.end()) return it->second;
  return std::nullopt;
}

}  // namespace tandem::host::hub
