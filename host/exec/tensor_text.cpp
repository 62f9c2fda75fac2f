#include "exec/tensor_text.hpp"

#include "tandem/tandem.hpp"

namespace tandem::host::exec {

// One table of dtype facts for host and plugins: the SDK's C++ helper.
size_t dtype_size(tdm_dtype dtype) noexcept {
  return tandem::dtype_size(dtype);
}
const char* dtype_name(tdm_dtype dtype) noexcept {
  return tandem::dtype_name(dtype);
}

size_t tensor_bytes(const TensorType& type) noexcept {
  size_t count = 1;
  for (int64_t d : type.dims) count *= d > 0 ? static_cast<size_t>(d) : 0;
  return count * dtype_size(type.dtype);
}

std::string type_text(const TensorType& type) {
  std::string text = std::string(dtype_name(type.dtype)) + "[";
  for (size_t i = 0; i < type.dims.size(); ++i) text += (i > 0 ? "," : "") + std::to_string(type.dims[i]);
  return text + "]";
}

}  // namespace tandem::host::exec
