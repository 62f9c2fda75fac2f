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

}  // namespace

struct TextRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Result<TextRegex> TextRegex::compile(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  auto code = std::make_shared<Code>();
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code->code == nullptr)
    return make_error("the pattern " + pattern + " does not compile (PCRE2: " + pcre2_message(error) +
                          ", at offset " + std::to_string(offset) + ")",
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
