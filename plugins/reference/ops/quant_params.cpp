// Reference backend — the quantization grid's attributes (quant_params.hpp).
#include "quant_params.hpp"

#include <string>

namespace tandem::reference {

QuantParams quant_params(const Check& c, const Dims& dims, int64_t lo, int64_t hi) {
  QuantParams p;
  p.scale = c.floats_attr("scale");
  p.zero = c.ints_attr("zero_point", {0});
  if (p.scale.empty()) c.fail("attribute 'scale' is empty");
  for (double s : p.scale)
    if (!(s > 0) || !std::isfinite(s) || !std::isfinite(float(s)) || float(s) <= 0)
      c.fail("every scale must be positive and finite in f32, got " + std::to_string(s));
  if (p.zero.size() == 1 && p.scale.size() > 1) p.zero.assign(p.scale.size(), p.zero[0]);
  if (p.zero.size() != p.scale.size())
    c.fail("zero_point has " + std::to_string(p.zero.size()) + " entries but scale has " +
           std::to_string(p.scale.size()));
  for (int64_t z : p.zero)
    if (z < lo || z > hi)
      c.fail("zero point " + std::to_string(z) + " is outside " + std::to_string(lo) + ".." +
             std::to_string(hi));
  if (p.scale.size() > 1) {
    if (dims.empty()) c.fail("per-channel scales need a tensor of rank >= 1");
    const size_t axis = c.axis(c.int_attr("axis", 1), dims.size(), "axis");
    p.channels = dims[axis];
    if (int64_t(p.scale.size()) != p.channels)
      c.fail("scale has " + std::to_string(p.scale.size()) + " entries but dim " + std::to_string(axis) +
             " of " + dims_str(dims) + " is " + std::to_string(p.channels));
    for (size_t d = axis + 1; d < dims.size(); ++d) p.inner *= dims[d];
  }
  return p;
}

}  // namespace tandem::reference
