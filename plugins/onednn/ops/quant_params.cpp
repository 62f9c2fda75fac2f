// oneDNN backend — the quantization grid's attributes (quant_params.hpp).
#include "quant_params.hpp"

#include <cmath>
#include <string>

namespace tandem::onednn {

std::vector<float> float_list(const Check& c, const char* name) {
  std::vector<float> v;
  for (double d : c.floats_attr(name)) v.push_back(float(d));
  return v;
}

void check_scales(const Check& c, const std::vector<float>& s, const char* name) {
  if (s.empty()) c.fail(std::string("attribute '") + name + "' is empty");
  for (float v : s)
    if (!(v > 0) || !std::isfinite(v)) c.fail(std::string("every ") + name + " must be positive and finite");
}

QuantParams quant_params(const Check& c, const Dims& dims, int64_t lo, int64_t hi) {
  QuantParams p;
  p.scale = float_list(c, "scale");
  check_scales(c, p.scale, "scale");
  const std::vector<int64_t> z = c.ints_attr("zero_point", {0});
  if (z.size() != 1 && z.size() != p.scale.size())
    c.fail("zero_point has " + std::to_string(z.size()) + " entries but scale has " +
           std::to_string(p.scale.size()));
  for (int64_t v : z)
    if (v < lo || v > hi) c.fail("zero point " + std::to_string(v) + " is outside the quantized range");
  for (size_t i = 0; i < p.scale.size(); ++i) p.zero.push_back(int32_t(z.size() == 1 ? z[0] : z[i]));
  if (p.scale.size() > 1) {
    if (dims.empty()) c.fail("per-channel scales need a tensor of rank >= 1");
    const size_t axis = c.axis(c.int_attr("axis", 1), dims.size(), "axis");
    p.channels = dims[axis];
    if (int64_t(p.scale.size()) != p.channels)
      c.fail("scale has " + std::to_string(p.scale.size()) +
             " entries but dims[axis] = " + std::to_string(p.channels));
    for (size_t d = axis + 1; d < dims.size(); ++d) p.inner *= dims[d];
  }
  return p;
}

}  // namespace tandem::onednn
