// Sizes and short text for tensor types, as the executor and its error
// messages need them ("f32[128,784]").
#pragma once

#include <cstddef>
#include <string>

#include "graph/graph.hpp"

namespace tandem::host::exec {

// Bytes of one element; 0 for TDM_DTYPE_INVALID or an unknown dtype.
size_t dtype_size(tdm_dtype dtype) noexcept;
const char* dtype_name(tdm_dtype dtype) noexcept;
// Dense row-major bytes of a tensor (a rank-0 tensor holds one element).
size_t tensor_bytes(const TensorType& type) noexcept;
// "f32[128,784]"; "f32[]" for a scalar.
std::string type_text(const TensorType& type);

}  // namespace tandem::host::exec
