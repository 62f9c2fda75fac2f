// Shape rules the host needs to build graphs: every node's output shape is
// computed here and handed to the backend in the op description, so these
// must agree with sdk/ops.md exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem::host::build {

using Dims = std::vector<int64_t>;

int64_t numel(const Dims& dims);
std::string dims_str(const Dims& dims);  // "[64,1,28,28]"

// Output size of a convolution or pooling window along one dim; nullopt when
// the window does not fit.
std::optional<int64_t> window_out(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation);

// numpy broadcasting; nullopt when incompatible.
std::optional<Dims> broadcast(const Dims& a, const Dims& b);

// Axes of `out` that `in` was broadcast along (for reducing its gradient),
// counted in out's rank.
std::vector<int64_t> broadcast_axes(const Dims& in, const Dims& out);

}  // namespace tandem::host::build
