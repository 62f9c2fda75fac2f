// How many bits the s8 weights of a post-training quantized model use.
//
// 8 bits (|w| <= 127) wherever INT8 sums are exact for any weights: VNNI
// CPUs, GPUs, the reference backend. 7 bits (|w| <= 63) for a CPU whose
// INT8 kernels add u8·s8 products pairwise in saturating 16-bit lanes (x86
// without VNNI, as the device's FEATURES say: ABI 1.4): a backend must stay
// exact there anyway (oneDNN's does, at twice the arithmetic), but with
// 7-bit weights no pair can saturate and it runs its direct kernel. One bit
// less costs little accuracy (fbgemm's reduce_range makes the same trade on
// activations); calibration.json records the choice and why.
#pragma once

#include <string>

#include "device/device.hpp"
#include "util/result.hpp"

namespace tandem::host::quant {

struct WeightRange {
  int qmax = 127;
  std::string reason;  // one line, for calibration.json and the command's output
};

// The range for models that `device` will run (`tandem quantize --weight-bits auto`).
WeightRange weight_range_for(const DeviceInfo& device);

// `--weight-bits`: "auto", "8" or "7"; an error names the flag and the choices.
Result<WeightRange> parse_weight_bits(const std::string& value, const DeviceInfo& device);

}  // namespace tandem::host::quant
