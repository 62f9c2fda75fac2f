#include "ops/shapes.hpp"

namespace tandem::host::ops {

std::vector<int64_t> broadcast_axes(const Dims& in, const Dims& out) {
  std::vector<int64_t> axes;
  const size_t lead = out.size() - in.size();
  for (size_t i = 0; i < out.size(); ++i)
    if (i < lead || (in[i - lead] == 1 && out[i] != 1)) axes.push_back(static_cast<int64_t>(i));
  return axes;
}

}  // namespace tandem::host::ops
