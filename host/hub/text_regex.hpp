// A regular expression as Hugging Face tokenizers write them (a Split
// pre-tokenizer's pattern, GPT-2's byte-level pattern), run by PCRE2 in UTF
// and UCP mode: \p{L}, \s and \d are Unicode's classes, (?i:...) folds
// case by Unicode's rules. HF itself runs them with Oniguruma; the two read
// these patterns alike but for one character, U+180E, which PCRE2 counts
// as \s and Oniguruma does not: \s and \S are rewritten to leave it out.
// PCRE2 stays behind this header, in its own translation unit.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "util/result.hpp"

namespace tandem::host::hub {

class TextRegex {
 public:
  // Errors quote PCRE2's reason and the offset in the pattern.
  static Result<TextRegex> compile(const std::string& pattern);

  // Calls `visit` with the [begin, end) byte range of each successive match
  // in `text` (valid UTF-8), leftmost first, each search starting where the
  // last match ended. As in Oniguruma's iteration (HF's), an empty match is
  // a match too, except right where the previous match ended: the search
  // then goes on one character further.
  Result<void> for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& visit) const;

  const std::string& pattern() const noexcept { return pattern_; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
  std::string pattern_;
};

}  // namespace tandem::host::hub
