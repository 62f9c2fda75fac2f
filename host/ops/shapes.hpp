// Shape arithmetic the host's lowering shares: broadcast axes for
// gradients, ZeRO's shards. The catalog ops' shape rules, element counts
// and numpy broadcasting are the SDK's (tandem/op_shapes.hpp,
// tandem/shape_util.hpp), so the host and every backend compute them the
// same way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tandem/shape_util.hpp"

namespace tandem::host::ops {

using tandem::Dims;
using tandem::dims_str;
using tandem::numel;

// Axes of `out` that `in` was broadcast along (for reducing its gradient),
// counted in out's rank.
std::vector<int64_t> broadcast_axes(const Dims& in, const Dims& out);

// ZeRO's flat shards: each of `world` ranks holds s = ceil(n / world) of a
// tensor's n elements (at least 1), rank r the elements [r*s, r*s + s), the
// last shards padded with zeros.
inline int64_t zero_shard_elements(int64_t elements, int world) {
  return std::max<int64_t>(1, (elements + world - 1) / world);
}
// Of rank `rank`'s shard, the elements [begin, begin + count) of the
// tensor it holds; the shard's other count..s are padding.
struct ZeroShardRange {
  int64_t begin = 0, count = 0;
};
inline ZeroShardRange zero_shard_range(int64_t elements, int world, int rank) {
  const int64_t begin = std::min(elements, zero_shard_elements(elements, world) * rank);
  return {begin, std::min(zero_shard_elements(elements, world), elements - begin)};
}

}  // namespace tandem::host::ops
