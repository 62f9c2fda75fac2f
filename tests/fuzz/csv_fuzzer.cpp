// Fuzzes the CSV reader (host/data/csv_reader.cpp): CSV data sets are
// exported by other tools and edited by hand, so every cell is untrusted
// text, and a bad one must be an error naming line and column.
//
// Input: the first byte picks the options, the rest is the file. Bit 0:
// a header line; bits 1-2: the delimiter (, ; tab space); bits 3-7: the
// label column, 5-bit two's complement (0..15, then -16..-1; -1 is the last
// column). A zero byte is the default options.
#include <cmath>
#include <sstream>
#include <string>

#include "data/csv_reader.hpp"
#include "fuzz_support.hpp"

using tandem::fuzz::expect;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  tandem::host::data::CsvOptions options;
  options.has_header = (data[0] & 1) != 0;
  options.delimiter = ",;\t "[(data[0] >> 1) & 3];
  options.label_column = ((data[0] >> 3) ^ 16) - 16;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  const auto set = tandem::host::data::parse_csv(in, "fuzz.csv", options);
  if (!set) {
    expect(set.error().message.starts_with("fuzz.csv"), "an error names the file");
    return 0;
  }
  // What the loader relies on (dataset.hpp): one row of features per label,
  // finite features, labels below num_classes.
  expect(set->sample_shape.size() == 1 && set->sample_shape[0] >= 1, "at least one feature column");
  expect(set->features.size() == set->labels.size() * size_t(set->sample_numel()),
         "one row of features per label");
  for (float f : set->features) expect(std::isfinite(f), "features are finite");
  for (int32_t l : set->labels) expect(l >= 0 && l < set->num_classes, "labels are class indices");
  return 0;
}
