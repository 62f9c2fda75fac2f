#include "quant/weight_range.hpp"

#include <sstream>

#include "quant/affine.hpp"

namespace tandem::host::quant {
namespace {

bool has_word(const std::string& words, const std::string& word) {
  std::istringstream in(words);
  for (std::string w; in >> w;)
    if (w == word) return true;
  return false;
}

// An x86 instruction set that pairs u8·s8 products in 16-bit lanes
// (pmaddubsw) when it has no VNNI instruction to sum them in 32 bits.
bool pairs_saturate(const std::string& features) {
  const bool x86 = has_word(features, "avx2") || has_word(features, "avx512_core") ||
                   has_word(features, "avx") || has_word(features, "sse41");
  return x86 && !has_word(features, "vnni");
}

}  // namespace

WeightRange weight_range_for(const DeviceInfo& device) {
  if (device.kind == TDM_DEVICE_CPU && pairs_saturate(device.features))
    return {kWeightQmax7, "7-bit weights: " + device.id + " (" + device.features +
                              ") has no VNNI, so its INT8 kernels add products pairwise in 16 bits"};
  return {kWeightQmax8, "8-bit weights: " + device.id + " sums INT8 products exactly for any weights"};
}

Result<WeightRange> parse_weight_bits(const std::string& value, const DeviceInfo& device) {
  if (value == "auto") return weight_range_for(device);
  if (value == "8") return WeightRange{kWeightQmax8, "8-bit weights: --weight-bits 8"};
  if (value == "7") return WeightRange{kWeightQmax7, "7-bit weights: --weight-bits 7"};
  return make_error("--weight-bits " + value + ": expected auto, 8 or 7", TDM_INVALID_ARGUMENT);
}

}  // namespace tandem::host::quant
