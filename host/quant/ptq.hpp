// Post-training quantization (`tandem quantize`): calibrate the inputs of a
// trained f32 model's linear and conv2d layers on a few batches of training data, and
// write an INT8 model — calibration.json and an INT8 checkpoint (s8
// weights, f32 weight scales and biases) — into one directory.
#pragma once

#include <string>

#include "checkpoint/safetensors.hpp"
#include "data/dataset.hpp"
#include "data/transforms.hpp"
#include "device/device.hpp"
#include "model/model_spec.hpp"
#include "plugin/registry.hpp"
#include "quant/calibration_file.hpp"
#include "quant/calibrators.hpp"
#include "quant/weight_range.hpp"

namespace tandem::host::quant {

struct PtqOptions {
  Method method = Method::MinMax;
  double percentile = 99.99;
  bool per_channel = false;
  WeightRange weight_range;  // 8 bits unless the target device wants 7
  int64_t samples = 512;     // calibration samples, from the start of `calib`
  std::string output_dir;
  std::string model_path;  // recorded in calibration.json
  int loader_threads = 1;
};

struct PtqResult {
  Calibration calibration;
  std::string checkpoint_path;
  std::string calibration_path;
};

// `weights` is the f32 checkpoint (read from `source`, named in errors).
Result<PtqResult> quantize_model(const model::ModelSpec& spec, const DeviceHandle& device,
                                 const PluginRegistry& registry, const checkpoint::Checkpoint& weights,
                                 const std::string& source, const data::Dataset& calib,
                                 const data::Transforms& transforms, const PtqOptions& options);

}  // namespace tandem::host::quant
