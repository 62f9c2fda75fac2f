// A regular expression as Hugging Face tokenizers write them (a Split
// pre-tokenizer's pattern, GPT-2's byte-level pattern), run by PCRE2 in UTF
// and UCP mode: \p{L}, \s and \d are Unicode's classes, (?i:...) folds
// case by Unicode's rules. HF itself runs them with Oniguruma; the two read
// these patterns alike except that PCRE2 counts U+180E MONGOLIAN VOWEL
// SEPARATOR as \s (Oniguruma, following Unicode 6.3, does not). PCRE2
// stays behind this header, in its own translation unit.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.hpp"

namespace tandem::host::hub {

class TextRegex {
 public:
  // Errors quote PCRE2's reason and the offset in the pattern.
  static Result<TextRegex> compile(const std::string& pattern);

  // The [begin, end) byte ranges of the successive non-empty matches in
  // `text` (valid UTF-8), leftmost first, each search starting where the
  // last match ended. An empty match delimits nothing: the search goes on
  // one character further, as Oniguruma's iteration does.
  Result<std::vector<std::pair<size_t, size_t>>> find_all(std::string_view text) const;

  const std::string& pattern() const noexcept { return pattern_; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
  std::string pattern_;
};

}  // namespace tandem::host::hub
