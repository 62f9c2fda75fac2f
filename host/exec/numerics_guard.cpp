#include "exec/numerics_guard.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>

#include "exec/tensor_text.hpp"
#include "tandem/half.hpp"
#include "util/last_error.hpp"

namespace tandem::host::exec {
namespace {

template <class T, class ToDouble>
std::optional<std::pair<size_t, double>> scan(const void* data, size_t count, ToDouble to_double) {
  for (size_t i = 0; i < count; ++i) {
    T raw;
    std::memcpy(&raw, static_cast<const unsigned char*>(data) + i * sizeof(T), sizeof(T));
    const double v = to_double(raw);
    if (!std::isfinite(v)) return std::make_pair(i, v);
  }
  return std::nullopt;
}

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

bool is_floating(tdm_dtype dtype) {
  return dtype == TDM_F32 || dtype == TDM_F64 || dtype == TDM_F16 || dtype == TDM_BF16;
}

std::optional<std::pair<size_t, double>> first_non_finite(const void* data, size_t count, tdm_dtype dtype) {
  switch (dtype) {
    case TDM_F32:
      return scan<float>(data, count, [](float v) { return double(v); });
    case TDM_F64:
      return scan<double>(data, count, [](double v) { return v; });
    case TDM_F16:
      return scan<uint16_t>(data, count, [](uint16_t v) { return double(f16_to_f32(v)); });
    case TDM_BF16:
      return scan<uint16_t>(data, count, [](uint16_t v) { return double(bf16_to_f32(v)); });
    default:
      return std::nullopt;
  }
}

Result<void> NumericsGuard::poison(tdm_stream* stream, const std::vector<GuardedOutput>& outputs) {
  if (!options_.poison) return {};
  const tdm_backend_api& api = *device_->backend().backend;
  for (const GuardedOutput& out : outputs) {
    if (out.in_place || out.bytes == 0) continue;
    host_.resize(out.bytes);
    const size_t size = dtype_size(out.dtype);
    const uint64_t nan_bits = out.dtype == TDM_F32   ? 0x7fc00000u
                              : out.dtype == TDM_F64 ? 0x7ff8000000000000ull
                              : out.dtype == TDM_F16 ? 0x7e00u
                                                     : 0x7fc0u;  // bf16
    for (size_t i = 0; i + size <= out.bytes; i += size) std::memcpy(&host_[i], &nan_bits, size);
    clear_last_error();
    // Ordered before the launch on the same stream; the host buffer must
    // stay intact until the copy is done.
    tdm_status status = api.copy_h2d(stream, out.pointer, host_.data(), out.bytes);
    if (status == TDM_OK) status = api.stream_synchronize(stream);
    if (status != TDM_OK)
      return make_error("--poison-outputs: filling '" + out.value + "' on " + device_->id() +
                            " failed: " + last_error_text("status " + std::to_string(status)),
                        status);
  }
  return {};
}

Result<void> NumericsGuard::check(tdm_stream* stream, const std::vector<GuardedOutput>& outputs,
                                  const std::string& node, tdm_phase phase) {
  if (!options_.check || (phase == TDM_PHASE_BACKWARD && !options_.check_backward)) return {};
  const tdm_backend_api& api = *device_->backend().backend;
  for (const GuardedOutput& out : outputs) {
    if (out.bytes == 0) continue;
    host_.resize(out.bytes);
    clear_last_error();
    tdm_status status = api.copy_d2h(stream, host_.data(), out.pointer, out.bytes);
    if (status == TDM_OK) status = api.stream_synchronize(stream);
    if (status != TDM_OK)
      return make_error(
          node + " failed on " + device_->id() + ": " + last_error_text("status " + std::to_string(status)),
          status);
    const size_t count = out.bytes / dtype_size(out.dtype);
    if (auto bad = first_non_finite(host_.data(), count, out.dtype))
      return make_error("--check-numerics: " + node + " on " + device_->id() +
                            " is the first node whose output is not finite: it wrote " +
                            number_text(bad->second) + " into '" + out.value + "' (element " +
                            std::to_string(bad->first) + " of " + std::to_string(count) + ")",
                        TDM_ABORTED);
  }
  return {};
}

}  // namespace tandem::host::exec
