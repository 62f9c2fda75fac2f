// What the graph builder needs to emit a layer in INT8: the u8 grid of its
// input activation and the scales of its s8 weights (from calibration.json
// and the INT8 checkpoint; see host/quant/).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tandem::host::lowering {

struct Int8Layer {
  double x_scale = 1;
  int64_t x_zero_point = 0;
  std::vector<double> w_scale;  // 1 entry (per tensor) or out_features (per channel)
};

// Layer name -> its INT8 parameters; layers not listed stay f32.
using Int8Plan = std::map<std::string, Int8Layer>;

// Whether a layer kind of the model file has an INT8 form (int8_layers.cpp):
// the layers `tandem quantize` calibrates.
bool has_int8_form(const std::string& layer_op);

}  // namespace tandem::host::lowering
