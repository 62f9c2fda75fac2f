#include "build/shapes.hpp"

#include <algorithm>

namespace tandem::host::build {

int64_t numel(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string dims_str(const Dims& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::optional<int64_t> window_out(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  const int64_t span = dilation * (kernel - 1) + 1;
  if (stride < 1 || kernel < 1 || pad < 0 || in + 2 * pad < span) return std::nullopt;
  return (in + 2 * pad - span) / stride + 1;
}

std::optional<Dims> broadcast(const Dims& a, const Dims& b) {
  const size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = std::max(da, db);
  }
  return out;
}

std::vector<int64_t> broadcast_axes(const Dims& in, const Dims& out) {
  std::vector<int64_t> axes;
  const size_t lead = out.size() - in.size();
  for (size_t i = 0; i < out.size(); ++i)
    if (i < lead || (in[i - lead] == 1 && out[i] != 1)) axes.push_back(static_cast<int64_t>(i));
  return axes;
}

}  // namespace tandem::host::build
