// Fuzzes the model-file parser (host/model) with --set overrides: a model
// file and the overrides on a command line are the first things every
// command reads, often written by hand, and one bad byte must give an error
// at file:line:col (or naming the override), never a crash.
//
// Input: leading lines "--set KEY=VALUE" are the overrides, in order; the
// rest is the model file's TOML.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "model/model_parser.hpp"

using tandem::fuzz::expect;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  constexpr std::string_view kSet = "--set ";
  while (rest.starts_with(kSet)) {
    const size_t end = rest.find('\n');
    overrides.emplace_back(rest.substr(kSet.size(), end == rest.npos ? rest.npos : end - kSet.size()));
    rest = end == rest.npos ? std::string_view() : rest.substr(end + 1);
  }
  const auto spec = tandem::host::model::parse_model_text(std::string(rest), "fuzz.toml", overrides);
  if (!spec) {
    const std::string& m = spec.error().message;
    expect(m.starts_with("fuzz.toml") || m.starts_with("--set "), "an error names the file or the override");
    return 0;
  }
  expect(!spec->layers.empty() && !spec->input_shape.empty(), "a parsed model has an input and layers");
  for (int64_t d : spec->input_shape) expect(d > 0, "input dimensions are positive");
  expect(spec->train.batch_size > 0, "batch_size is positive");
  return 0;
}
