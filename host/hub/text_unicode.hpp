// The text handling tokenizers share: UTF-8 walking, the byte-level
// alphabet of GPT-2-style BPE, and NFC normalization (ICU, kept in its own
// translation unit so that no ICU header reaches the rest of the host).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.hpp"

namespace tandem::host::hub {

// The byte offset of the first byte of `text` that does not start or
// continue a well-formed UTF-8 sequence (overlong forms, surrogates and
// code points past U+10FFFF included), or nothing when all of it is UTF-8.
std::optional<size_t> invalid_utf8_at(std::string_view text);

// The length in bytes of the UTF-8 sequence whose lead byte is `lead`
// (1 for a byte that cannot lead one, so that a walk always advances).
size_t utf8_length(unsigned char lead);

// The code point at `text[at]` (well-formed UTF-8 assumed).
char32_t utf8_decode(std::string_view text, size_t at);
void utf8_append(std::string& out, char32_t c);

// Unicode's White_Space property (what HF's added tokens strip with lstrip/rstrip).
bool is_white_space(char32_t c);

// GPT-2's byte-level alphabet: every byte is a printable character (its own
// code point for the visible Latin-1 ones, U+0100 onwards for the rest), so
// that a vocabulary of strings covers all bytes. `byte_char(b)` is that
// character in UTF-8; `char_byte` maps it back.
const std::string& byte_char(unsigned char b);
std::optional<unsigned char> char_byte(char32_t c);
// `text` with every byte replaced by its character of the alphabet.
std::string to_byte_chars(std::string_view text);

// NFC of `text` (valid UTF-8). Text already in NFC, and so all ASCII text,
// comes back unchanged without a copy into ICU's UTF-16. Fails only when
// ICU cannot load its data.
Result<std::string> nfc(std::string_view text);

}  // namespace tandem::host::hub
