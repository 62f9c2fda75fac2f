// Reads the pixels of a PNG as Chromium's --screenshot writes it (8-bit
// RGB or RGBA, not interlaced), so a test can count what was painted.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace tandem::test {

struct Pixels {
  uint32_t width = 0, height = 0;
  std::vector<uint32_t> rgb;  // 0xRRGGBB per pixel, row by row
  std::string error;          // why the file could not be read (empty: read)
};

inline uint32_t big_endian32(const std::string& b, size_t at) {
  return uint32_t(uint8_t(b[at])) << 24 | uint32_t(uint8_t(b[at + 1])) << 16 |
         uint32_t(uint8_t(b[at + 2])) << 8 | uint8_t(b[at + 3]);
}

// The PNG filters (paeth and all) undone in place, one row after another.
inline void unfilter(std::vector<uint8_t>& data, size_t row_bytes, size_t channels, uint32_t height) {
  for (uint32_t y = 0; y < height; ++y) {
    uint8_t* row = &data[y * (row_bytes + 1)];
    const uint8_t* up = y > 0 ? row - (row_bytes + 1) : nullptr;
    const uint8_t filter = row[0];
    uint8_t* px = row + 1;
    const uint8_t* prior = up ? up + 1 : nullptr;
    for (size_t i = 0; i < row_bytes; ++i) {
      const int a = i >= channels ? px[i - channels] : 0, b = prior ? prior[i] : 0,
                c = (prior && i >= channels) ? prior[i - channels] : 0;
      const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
      const int predictor = filter == 1   ? a
                            : filter == 2 ? b
                            : filter == 3 ? (a + b) / 2
                            : filter == 4 ? (pa <= pb && pa <= pc ? a
                                             : pb <= pc           ? b
                                                                  : c)
                                          : 0;
      px[i] = static_cast<uint8_t>(px[i] + predictor);
    }
  }
}

inline Pixels read_png(const std::string& bytes) {
  Pixels out;
  if (bytes.size() < 8 || bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return {0, 0, {}, "not a PNG file"};
  std::string idat;
  uint8_t depth = 0, colour = 0, interlace = 0;
  for (size_t at = 8; at + 12 <= bytes.size();) {
    const uint32_t length = big_endian32(bytes, at);
    const std::string type = bytes.substr(at + 4, 4);
    if (type == "IHDR") {
      out.width = big_endian32(bytes, at + 8), out.height = big_endian32(bytes, at + 12);
      depth = uint8_t(bytes[at + 16]), colour = uint8_t(bytes[at + 17]), interlace = uint8_t(bytes[at + 20]);
    }
    if (type == "IDAT") idat += bytes.substr(at + 8, length);
    at += 12 + length;
  }
  if (depth != 8 || (colour != 2 && colour != 6) || interlace != 0)
    return {0, 0, {}, "a PNG other than 8-bit RGB(A), not interlaced"};
  const size_t channels = colour == 6 ? 4 : 3, row_bytes = out.width * channels;
  std::vector<uint8_t> data((row_bytes + 1) * out.height);
  uLongf size = data.size();
  if (uncompress(data.data(), &size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK ||
      size != data.size())
    return {0, 0, {}, "its image data does not inflate to its size"};
  unfilter(data, row_bytes, channels, out.height);
  for (uint32_t y = 0; y < out.height; ++y)
    for (uint32_t x = 0; x < out.width; ++x) {
      const uint8_t* p = &data[y * (row_bytes + 1) + 1 + x * channels];
      out.rgb.push_back(uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2]);
    }
  return out;
}

}  // namespace tandem::test
