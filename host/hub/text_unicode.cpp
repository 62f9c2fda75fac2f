#include "hub/text_unicode.hpp"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <vector>

namespace tandem::host::hub {
namespace {

// The byte-to-character table of the byte-level alphabet. The visible
// bytes keep their Latin-1 code point; the others (controls, space, DEL,
// NBSP, soft hyphen) take U+0100, U+0101, ... in byte order, which is the
// assignment every GPT-2-style vocabulary was built with.
struct ByteAlphabet {
  std::array<std::string, 256> chars;
  std::array<int16_t, 512> bytes{};  // code point (< 512) -> byte, -1 where none
  ByteAlphabet() {
    bytes.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool visible = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = visible ? char32_t(b) : next++;
      utf8_append(chars[size_t(b)], c);
      bytes[size_t(c)] = int16_t(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet table;
  return table;
}

}  // namespace

size_t utf8_length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return lead < 0xF8 ? 4 : 1;
}

std::optional<size_t> invalid_utf8_at(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    const size_t n = utf8_length(lead);
    if (n == 1 || i + n > text.size()) return i;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return i;
    const char32_t c = utf8_decode(text, i);
    const char32_t least = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
    if (c < least || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return i;
    i += n;
  }
  return std::nullopt;
}

char32_t utf8_decode(std::string_view text, size_t at) {
  const auto lead = static_cast<unsigned char>(text[at]);
  const size_t n = utf8_length(lead);
  if (n == 1) return lead;
  char32_t c = lead & (0x7F >> n);
  for (size_t k = 1; k < n && at + k < text.size(); ++k) c = (c << 6) | (text[at + k] & 0x3F);
  return c;
}

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

const std::string& byte_char(unsigned char b) {
  return alphabet().chars[b];
}

std::optional<unsigned char> char_byte(char32_t c) {
  if (c >= 512 || alphabet().bytes[c] < 0) return std::nullopt;
  return static_cast<unsigned char>(alphabet().bytes[c]);
}

std::string to_byte_chars(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) out += byte_char(static_cast<unsigned char>(c));
  return out;
}

Result<std::string> nfc(std::string_view text) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(status);
  const icu::UnicodeString in =
      icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), int32_t(text.size())));
  if (U_SUCCESS(status) && normalizer->isNormalized(in, status) && U_SUCCESS(status))
    return std::string(text);
  icu::UnicodeString out;
  if (U_SUCCESS(status)) out = normalizer->normalize(in, status);
  if (U_FAILURE(status))
    return make_error(std::string("NFC normalization failed in ICU (") + u_errorName(status) +
                          "): is its data library (libicudata) installed?",
                      TDM_INTERNAL);
  std::string result;
  out.toUTF8String(result);
  return result;
}

}  // namespace tandem::host::hub
