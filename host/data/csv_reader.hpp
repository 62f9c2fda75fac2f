// Reader for numeric CSV: one sample per line, one column holding the class
// index, every other column a feature. An optional header line is skipped.
#pragma once

#include <cstdint>
#include <istream>
#include <string>

#include "data/dataset.hpp"
#include "util/result.hpp"

namespace tandem::host::data {

struct CsvOptions {
  int label_column = 0;  // negative counts from the end (-1 = last)
  bool has_header = false;
  char delimiter = ',';
  int64_t classes = 0;  // > 0: a label at or above it is an error at its line
};

// Errors name the file, the line and column, and the text that failed.
Result<Dataset> load_csv(const std::string& path, const CsvOptions& options);
// The same from a stream; `path` only names it in errors (the fuzzer,
// tests/fuzz, calls this one).
Result<Dataset> parse_csv(std::istream& in, const std::string& path, const CsvOptions& options);

}  // namespace tandem::host::data
