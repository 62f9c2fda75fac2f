// calibration.json: the result of post-training quantization in a form any
// backend or tool can read without Tandem (plain JSON, one entry per layer).
//
// {
//   "format": "tandem-int8-calibration", "version": 1,
//   "model": "examples/fmnist_mlp.toml", "checkpoint": "model-int8.safetensors",
//   "calibrator": "entropy", "percentile": 99.99, "samples": 512, "per_channel": true,
//   "weight_qmax": 63, "weight_range": "7-bit weights: onednn:0 (avx2 fma) has no VNNI, ...",
//   "layers": {
//     "fc1": {"op": "linear",
//             "input":  {"dtype": "u8", "scale": 0.0123, "zero_point": 54,
//                        "observed": [min, max], "clipped": [lo, hi]},
//             "weight": {"dtype": "s8", "axis": 0, "scales": [...], "zero_point": 0}}
//   }
// }
// Quantization follows sdk/ops.md: q = clamp(round_half_even(x / scale) + zero_point).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "quant/affine.hpp"
#include "util/result.hpp"

namespace tandem::host::quant {

inline constexpr const char* kCalibrationFile = "calibration.json";
inline constexpr const char* kInt8Checkpoint = "model-int8.safetensors";

struct LayerCalibration {
  std::string op = "linear";
  AffineU8 input;                    // u8 activation grid
  Range observed;                    // what calibration saw
  Range clipped;                     // what the calibrator kept
  std::vector<float> weight_scales;  // s8, symmetric; N entries or 1
};

struct Calibration {
  std::string model;
  std::string checkpoint = kInt8Checkpoint;  // relative to the file's directory
  std::string calibrator;
  double percentile = 0;  // percentile calibrator only
  int64_t samples = 0;
  bool per_channel = false;
  int weight_qmax = 127;     // largest |w| (127: 8 bits, 63: 7 bits; weight_range.hpp); 127 when absent
  std::string weight_range;  // why that range
  std::map<std::string, LayerCalibration> layers;
};

// Atomic write (temporary file, fsync, rename).
Result<void> write_calibration(const std::string& path, const Calibration& c);
// Errors name the file, what is wrong, and what to do.
Result<Calibration> read_calibration(const std::string& path);
// The same from the file's text; `path` only names it in errors (the
// fuzzer, tests/fuzz, calls this one).
Result<Calibration> parse_calibration(const std::string& text, const std::string& path);

}  // namespace tandem::host::quant
