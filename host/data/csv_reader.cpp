#include "data/csv_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string_view>

namespace tandem::host::data {
namespace {

std::vector<std::string_view> split_fields(std::string_view line, char delimiter) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t end = line.find(delimiter, start);
    fields.push_back(
        line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return fields;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<Dataset> load_csv(const std::string& path, const CsvOptions& options) {
  std::ifstream in(path);
  if (!in) return make_error(path + ": cannot open (" + std::strerror(errno) + ")", TDM_NOT_FOUND);
  return parse_csv(in, path, options);
}

Result<Dataset> parse_csv(std::istream& in, const std::string& path, const CsvOptions& options) {
  Dataset set;
  set.source = path;
  std::string line;
  size_t line_no = 0;
  size_t columns = 0;
  int32_t max_label = -1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1 && options.has_header) continue;
    if (trim(line).empty()) continue;
    const auto fields = split_fields(line, options.delimiter);
    if (columns == 0) {
      columns = fields.size();
      if (columns < 2)
        return make_error(
            path + ":" + std::to_string(line_no) + ": need a label and at least one feature column",
            TDM_INVALID_ARGUMENT);
    } else if (fields.size() != columns) {
      return make_error(path + ":" + std::to_string(line_no) + ": " + std::to_string(fields.size()) +
                            " columns, expected " + std::to_string(columns) + " like the first row",
                        TDM_INVALID_ARGUMENT);
    }
    const int label_col =
        options.label_column >= 0 ? options.label_column : static_cast<int>(columns) + options.label_column;
    if (label_col < 0 || static_cast<size_t>(label_col) >= columns)
      return make_error(path + ": label column " + std::to_string(options.label_column) + " is outside the " +
                            std::to_string(columns) + " columns",
                        TDM_INVALID_ARGUMENT);
    for (size_t c = 0; c < columns; ++c) {
      const std::string_view text = trim(fields[c]);
      double value = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (ec != std::errc() || end != text.data() + text.size() || text.empty())
        return make_error(path + ":" + std::to_string(line_no) + ":" + std::to_string(c + 1) + ": '" +
                              std::string(text) + "' is not a number",
                          TDM_INVALID_ARGUMENT);
      // A NaN or an infinity would train every weight to NaN a few steps
      // later, far from its cause: the sample is refused here.
      if (!std::isfinite(value) || !std::isfinite(static_cast<float>(value)))
        return make_error(path + ":" + std::to_string(line_no) + ":" + std::to_string(c + 1) + ": '" +
                              std::string(text) + "' is not a finite number (f32); fix or drop this row",
                          TDM_INVALID_ARGUMENT);
      if (static_cast<int>(c) == label_col) {
        // Range first: the cast of a value beyond int32 is undefined.
        if (value < 0 || value > kMaxLabel || value != static_cast<int32_t>(value))
          return make_error(path + ":" + std::to_string(line_no) + ":" + std::to_string(c + 1) + ": label '" +
                                std::string(text) + "' is not a class index (0, 1, 2, ... up to " +
                                std::to_string(kMaxLabel) + "); is column " + std::to_string(c + 1) +
                                " the label column?",
                            TDM_INVALID_ARGUMENT);
        if (options.classes > 0 && value >= double(options.classes))
          return make_error(path + ":" + std::to_string(line_no) + ":" + std::to_string(c + 1) + ": label " +
                                std::string(text) + " but the model has " + std::to_string(options.classes) +
                                " classes (labels 0 to " + std::to_string(options.classes - 1) +
                                "); fix the label or [model] classes",
                            TDM_INVALID_ARGUMENT);
        set.labels.push_back(static_cast<int32_t>(value));
        max_label = std::max(max_label, set.labels.back());
      } else {
        set.features.push_back(static_cast<float>(value));
      }
    }
  }
  if (set.labels.empty()) return make_error(path + ": no samples", TDM_INVALID_ARGUMENT);
  set.sample_shape = {static_cast<int64_t>(columns - 1)};
  set.num_classes = max_label + 1;
  return set;
}

}  // namespace tandem::host::data
