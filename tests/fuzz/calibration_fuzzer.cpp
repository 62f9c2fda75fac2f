// Fuzzes the reader of calibration.json (host/quant/calibration_file.cpp):
// the file sits beside an INT8 checkpoint, is plain JSON that other tools
// may write or edit, and its scales and zero points go straight into the
// INT8 kernels.
//
// Input: one calibration.json (parsed in memory, as read_calibration does
// after reading the file).
#include <cmath>
#include <string>

#include "fuzz_support.hpp"
#include "quant/calibration_file.hpp"

using tandem::fuzz::expect;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto c = tandem::host::quant::parse_calibration(text, "calibration.json");
  if (!c) {
    expect(c.error().message.starts_with("calibration.json"), "an error names the file");
    return 0;
  }
  expect(!c->layers.empty(), "a calibration lists layers");
  expect(c->weight_qmax >= 1 && c->weight_qmax <= 127, "weight_qmax is within 1..127");
  for (const auto& [name, l] : c->layers) {
    expect(l.input.scale > 0 && std::isfinite(l.input.scale), "input scales are positive and finite");
    expect(l.input.zero_point >= 0 && l.input.zero_point <= 255, "input zero points are u8");
  }
  return 0;
}
