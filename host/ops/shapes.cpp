#include "ops/shapes.hpp"

namespace tandem::host::ops {

std::optional<int64_t> window_out(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  if (stride < 1 || kernel < 1 || pad < 0 || dilation < 1) return std::nullopt;
  const int64_t span = dilation * (kernel - 1) + 1;
  if (in + 2 * pad < span) return std::nullopt;
  return (in + 2 * pad - span) / stride + 1;
}

std::optional<Dims> broadcast(const Dims& a, const Dims& b) {
  Dims out;
  if (!broadcast_shapes(a, b, out)) return std::nullopt;
  return out;
}

std::vector<int64_t> broadcast_axes(const Dims& in, const Dims& out) {
  std::vector<int64_t> axes;
  const size_t lead = out.size() - in.size();
  for (size_t i = 0; i < out.size(); ++i)
    if (i < lead || (in[i - lead] == 1 && out[i] != 1)) axes.push_back(static_cast<int64_t>(i));
  return axes;
}

}  // namespace tandem::host::ops
