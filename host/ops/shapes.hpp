// Shape arithmetic of the catalog's rules (sdk/ops.md). Element counts,
// shape text and numpy broadcasting are the SDK's (tandem/shape_util.hpp),
// so the host and every backend compute them the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tandem/shape_util.hpp"

namespace tandem::host::ops {

using tandem::Dims;
using tandem::dims_str;
using tandem::numel;

// Output size of a convolution or pooling window along one dim; nullopt when
// the window does not fit the padded input or an argument is out of range.
std::optional<int64_t> window_out(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation);

// numpy broadcasting (a dim of 1 takes the other's, so [0] with [1] is
// [0]); nullopt when the shapes do not broadcast.
std::optional<Dims> broadcast(const Dims& a, const Dims& b);

// Axes of `out` that `in` was broadcast along (for reducing its gradient),
// counted in out's rank.
std::vector<int64_t> broadcast_axes(const Dims& in, const Dims& out);

}  // namespace tandem::host::ops
