// Reference backend — the quantization grid's attributes (quant_params.hpp).
#include "quant_params.hpp"

#include <string>

namespace tandem::reference {

QuantParams quant_params(const Check& c, const Dims& dims) {
  QuantParams p;
  p.scale = c.floats_attr("scale");
  p.zero = c.ints_attr("zero_point", {0});
  if (p.zero.size() == 1 && p.scale.size() > 1) p.zero.assign(p.scale.size(), p.zero[0]);
  if (p.scale.size() > 1) {
    const size_t axis = c.axis(c.int_attr("axis", 1), dims.size(), "axis");
    p.channels = dims[axis];
    for (size_t d = axis + 1; d < dims.size(); ++d) p.inner *= dims[d];
  }
  return p;
}

}  // namespace tandem::reference
