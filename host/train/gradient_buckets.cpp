#include "train/gradient_buckets.hpp"

#include <algorithm>

#include "exec/tensor_text.hpp"
#include "ops/shapes.hpp"

namespace tandem::host::train {

std::vector<GradientBucket> plan_gradient_buckets(const Graph& graph, const std::vector<ValueId>& gradients,
                                                  size_t end, size_t bucket_bytes) {
  struct Ready {
    ValueId value;
    size_t at;
  };
  std::vector<Ready> order;
  for (ValueId grad : gradients) {
    size_t at = 0;
    const Value& v = *graph.value(grad);
    if (const auto p = graph.position(v.producer); p && *p < end) at = *p + 1;
    for (NodeId reader : graph.consumers(grad))
      if (const auto p = graph.position(reader); p && *p < end) at = std::max(at, *p + 1);
    order.push_back({grad, at});
  }
  // Stable: gradients final at the same node keep the optimizer's order.
  std::stable_sort(order.begin(), order.end(), [](const Ready& a, const Ready& b) { return a.at < b.at; });

  std::vector<GradientBucket> buckets;
  for (const Ready& r : order) {
    const Value& v = *graph.value(r.value);
    const size_t bytes = static_cast<size_t>(ops::numel(v.type.dims)) * exec::dtype_size(v.type.dtype);
    const bool start_new = buckets.empty() || buckets.back().dtype != v.type.dtype ||
                           (bucket_bytes == 0 ? true : buckets.back().bytes >= bucket_bytes);
    if (start_new) buckets.push_back(GradientBucket{{}, 0, 0, v.type.dtype});
    GradientBucket& b = buckets.back();
    b.gradients.push_back(r.value);
    b.ready_at = std::max(b.ready_at, r.at);
    b.bytes += bytes;
  }
  return buckets;
}

}  // namespace tandem::host::train
