// Reader for IDX files, the format of the MNIST family (Fashion-MNIST is in
// Debian's dataset-fashion-mnist, /usr/share/datasets/fashion-mnist).
//
// IDX: two zero bytes, a type byte (0x08 u8, 0x09 s8, 0x0B s16, 0x0C s32,
// 0x0D f32, 0x0E f64), a rank byte, `rank` big-endian u32 dimensions, then
// the row-major data, big-endian. Files may be gzip-compressed; zlib reads
// plain files transparently, so one path handles both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "util/result.hpp"

namespace tandem::host::data {

struct IdxArray {
  std::vector<int64_t> dims;
  uint8_t type = 0x08;                    // the file's element type
  std::vector<unsigned char> data;        // the elements as stored (big-endian when wider than a byte)
  size_t count() const noexcept;          // elements
  double value(size_t i) const noexcept;  // element i, converted
};

// Reads a whole IDX file. Errors name the file and the (uncompressed) byte
// offset where it went wrong: bad magic, unknown type, truncation, or a
// corrupted gzip stream.
Result<IdxArray> read_idx(const std::string& path);

// Images [N, H, W] and labels [N] into a data set with sample shape
// [1, H, W] and pixel values scaled by 1/255 ([0, 1] for u8 images, which
// stay bytes in memory: Dataset::pixels).
Result<Dataset> load_idx_images(const std::string& images_path, const std::string& labels_path);

}  // namespace tandem::host::data
