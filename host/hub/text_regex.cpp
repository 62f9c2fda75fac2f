#include "hub/text_regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <optional>

#include "hub/text_unicode.hpp"

namespace tandem::host::hub {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buffer);
}

// Copies the character class at pattern[at] ('[') to `out`, made to agree
// with Oniguruma on U+180E; returns the index after its ']'.
size_t copy_class(const std::string& pattern, size_t at, std::string& out) {
  std::string body = "[";
  size_t i = at + 1;
  const bool negated = i < pattern.size() && pattern[i] == '^';
  if (negated) body += pattern[i++];
  if (i < pattern.size() && pattern[i] == ']') body += pattern[i++];  // a literal ] first
  bool s = false, not_s = false;
  while (i < pattern.size() && pattern[i] != ']') {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      s = s || pattern[i + 1] == 's';
      not_s = not_s || pattern[i + 1] == 'S';
      body += pattern.substr(i, 2);
      i += 2;
    } else if (pattern.compare(i, 2, "[:") == 0 && pattern.find(":]", i + 2) != std::string::npos) {
      const size_t end = pattern.find(":]", i + 2) + 2;  // a POSIX class, [:alpha:]
      body += pattern.substr(i, end - i);
      i = end;
    } else {
      body += pattern[i++];
    }
  }
  if (i < pattern.size()) body += pattern[i++];
  // The class takes U+180E where PCRE2 would leave it out, or the reverse.
  const bool pcre2_takes = negated ? not_s : s;
  if (s == not_s)
    out += body;
  else if (pcre2_takes)
    out += "(?:(?!\\x{180E})" + body + ")";
  else
    out += "(?:" + body + "|\\x{180E})";
  return i;
}

// `pattern` with \s and \S as Oniguruma has them: PCRE2 counts U+180E
// MONGOLIAN VOWEL SEPARATOR as white space, Oniguruma and Unicode since 6.3
// do not. (Over all of Unicode, that is the one difference between the two
// in \s, \p{L} and \p{N}, the classes tokenizer patterns are made of.)
std::string oniguruma_spaces(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size();) {
    if (pattern.compare(i, 2, "\\Q") == 0) {  // a literal run, to \E
      const size_t end = std::min(pattern.find("\\E", i + 2), pattern.size());
      out += pattern.substr(i, end - i);
      i = end;
    } else if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char c = pattern[i + 1];
      out += c == 's' ? "(?:(?!\\x{180E})\\s)" : c == 'S' ? "(?:\\S|\\x{180E})" : pattern.substr(i, 2);
      i += 2;
    } else if (pattern[i] == '[') {
      i = copy_class(pattern, i, out);
    } else {
      out += pattern[i++];
    }
  }
  return out;
}

}  // namespace

struct TextRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Result<TextRegex> TextRegex::compile(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  auto code = std::make_shared<Code>();
  const std::string translated = oniguruma_spaces(pattern);
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                             PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code->code == nullptr)
    return make_error("the pattern " + pattern + " does not compile (PCRE2: " + pcre2_message(error) +
                          (translated == pattern ? ", at offset " + std::to_string(offset) : std::string()) +
                          ")",
                      TDM_INVALID_ARGUMENT);
  // The JIT is a speed-up only: where it is unavailable, pcre2_match interprets.
  pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);
  TextRegex regex;
  regex.code_ = std::move(code);
  regex.pattern_ = pattern;
  return regex;
}

Result<void> TextRegex::for_each_match(std::string_view text,
                                       const std::function<void(size_t, size_t)>& visit) const {
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> data(
      pcre2_match_data_create_from_pattern(code_->code, nullptr), pcre2_match_data_free);
  if (!data) return make_error("out of memory for a regular expression's match", TDM_OUT_OF_MEMORY);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::optional<size_t> last_end;
  for (size_t at = 0; at <= text.size();) {
    // The text was checked as UTF-8 once, before it was cut into pieces.
    const int rc =
        pcre2_match(code_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      return make_error("the pattern " + pattern_ + " failed on a text of " + std::to_string(text.size()) +
                            " bytes (PCRE2: " + pcre2_message(rc) + ")",
                        TDM_INVALID_ARGUMENT);
    const PCRE2_SIZE* range = pcre2_get_ovector_pointer(data.get());
    if (range[0] == range[1] && last_end == range[1]) {
      if (at >= text.size()) break;
      at += utf8_length(static_cast<unsigned char>(text[at]));
      continue;
    }
    visit(range[0], range[1]);
    last_end = at = range[1];
  }
  return {};
}

}  // namespace tandem::host::hub
