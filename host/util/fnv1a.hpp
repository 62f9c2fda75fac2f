// FNV-1a, 64 bits: a fast fingerprint of bytes (the model hash a checkpoint
// records, the build of a plugin the cost cache was measured with). Not a
// defence against anyone crafting a collision; it tells versions apart.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace tandem::host {

inline constexpr uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;

// Continues from `h` (kFnv1aBasis for a new fingerprint), so a long input
// can be fed in pieces.
inline uint64_t fnv1a64(std::string_view bytes, uint64_t h = kFnv1aBasis) {
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// 16 lower-case hex digits.
inline std::string hex64(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

}  // namespace tandem::host
