// Fuzzes the IDX reader (host/data/idx_reader.cpp): data files come from
// downloads that can be cut short or damaged, plain or gzip-compressed, and
// the header's dimensions decide how much is allocated and read.
//
// Input: one IDX file, plain or gzip (read_idx takes a path, so the input
// is written to a scratch file first).
#include <algorithm>
#include <cstdint>
#include <limits>

#include "data/idx_reader.hpp"
#include "fuzz_support.hpp"

using tandem::fuzz::expect;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tandem::fuzz::ScratchFile file("data.idx");
  const std::string& path = file.write(data, size);
  const auto array = tandem::host::data::read_idx(path);
  if (!array) {
    expect(array.error().message.starts_with(path), "an error names the file");
    return 0;
  }
  // The values are exactly what the dimensions say: callers index with them.
  // A zero dimension makes the count 0 however large the others are.
  expect(!array->dims.empty(), "an IDX array has a rank of at least 1");
  const bool empty = std::find(array->dims.begin(), array->dims.end(), 0) != array->dims.end();
  uint64_t count = empty ? 0 : 1;
  for (int64_t d : array->dims) {
    expect(d >= 0, "dimensions are not negative");
    if (empty) continue;
    expect(count <= std::numeric_limits<uint64_t>::max() / uint64_t(d), "the element count fits 64 bits");
    count *= uint64_t(d);
  }
  expect(count == array->count(), "the values match the dimensions");
  if (count > 0) (void)array->value(count - 1);  // the last element is inside the data
  return 0;
}
