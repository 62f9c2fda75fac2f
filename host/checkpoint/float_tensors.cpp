#include "checkpoint/float_tensors.hpp"

#include <cstring>

#include "tandem/half.hpp"

namespace tandem::host::checkpoint {

bool is_float_dtype(tdm_dtype dtype) {
  return dtype == TDM_F32 || dtype == TDM_F16 || dtype == TDM_BF16 || dtype == TDM_F64;
}

Result<std::vector<float>> as_f32(const TensorRecord& t, const std::string& file) {
  size_t n = 1;
  for (int64_t d : t.shape) n *= size_t(d);
  std::vector<float> out(n);
  const std::byte* p = t.data.data();
  switch (t.dtype) {
    case TDM_F32:
      std::memcpy(out.data(), p, n * 4);
      break;
    case TDM_F64:
      for (size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = float(d);
      }
      break;
    case TDM_F16:
    case TDM_BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, p + 2 * i, 2);
        out[i] = t.dtype == TDM_F16 ? f16_to_f32(bits) : bf16_to_f32(bits);
      }
      break;
    default:
      return make_error(file + ": tensor '" + t.name + "' is not a floating-point tensor",
                        TDM_INVALID_ARGUMENT);
  }
  return out;
}

Result<void> widen_to_f32(Checkpoint& cp, const std::string& file) {
  for (TensorRecord& t : cp.tensors) {
    if (t.dtype == TDM_F32 || !is_float_dtype(t.dtype)) continue;
    auto values = as_f32(t, file);
    if (!values) return values.error();
    t.dtype = TDM_F32;
    t.data.resize(values->size() * 4);
    std::memcpy(t.data.data(), values->data(), t.data.size());
  }
  return {};
}

}  // namespace tandem::host::checkpoint
