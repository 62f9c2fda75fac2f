#include "exec/tensor_text.hpp"

namespace tandem::host::exec {

size_t dtype_size(tdm_dtype dtype) noexcept {
  switch (dtype) {
    case TDM_F64:
    case TDM_S64:
      return 8;
    case TDM_F32:
    case TDM_S32:
      return 4;
    case TDM_F16:
    case TDM_BF16:
      return 2;
    case TDM_S8:
    case TDM_U8:
      return 1;
    default:
      return 0;
  }
}

const char* dtype_name(tdm_dtype dtype) noexcept {
  switch (dtype) {
    case TDM_F32:
      return "f32";
    case TDM_F64:
      return "f64";
    case TDM_F16:
      return "f16";
    case TDM_BF16:
      return "bf16";
    case TDM_S8:
      return "s8";
    case TDM_U8:
      return "u8";
    case TDM_S32:
      return "s32";
    case TDM_S64:
      return "s64";
    default:
      return "invalid";
  }
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
