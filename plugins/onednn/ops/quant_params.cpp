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

QuantParams quant_params(const Check& c, const Dims& dims) {
  QuantParams p;
  p.scale = float_list(c, "scale");
  const std::vector<int64_t> z = c.ints_attr("zero_point", {0});
  for (size_t i = 0; i < p.scale.size(); ++i) p.zero.push_back(int32_t(z.size() == 1 ? z[0] : z[i]));
  if (p.scale.size() > 1) {
    const size_t axis = c.axis(c.int_attr("axis", 1), dims.size(), "axis");
    p.channels = dims[axis];
    for (size_t d = axis + 1; d < dims.size(); ++d) p.inner *= dims[d];
  }
  return p;
}

}  // namespace tandem::onednn
