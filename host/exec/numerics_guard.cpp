#include "exec/numerics_guard.hpp"

#include <algorithm>
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

// Not one repeated byte, so a kernel storing a constant (0, NaN) past the
// end still changes some byte of the guard.
uint8_t guard_byte(size_t i) {
  return static_cast<uint8_t>(i * 131u + 0x5Bu);
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

Result<void> NumericsGuard::fill_guards(tdm_stream* stream, const std::vector<GuardedOutput>& outputs) {
  const tdm_backend_api& api = *device_->backend().backend;
  for (const GuardedOutput& out : outputs) {
    if (out.guard == 0) continue;
    host_.resize(out.guard);
    for (size_t i = 0; i < out.guard; ++i) host_[i] = guard_byte(i);
    clear_last_error();
    tdm_status status =
        api.copy_h2d(stream, static_cast<char*>(out.pointer) + out.extent, host_.data(), out.guard);
    if (status == TDM_OK) status = api.stream_synchronize(stream);
    if (status != TDM_OK)
      return make_error("--check-bounds: writing the guard after '" + out.value + "' on " + device_->id() +
                            " failed: " + last_error_text(silent_failure(status)),
                        status);
  }
  return {};
}

Result<void> NumericsGuard::check_guards(tdm_stream* stream, const std::vector<GuardedOutput>& outputs,
                                         const std::string& node) {
  const tdm_backend_api& api = *device_->backend().backend;
  for (const GuardedOutput& out : outputs) {
    if (out.guard == 0) continue;
    host_.resize(out.guard);
    clear_last_error();
    tdm_status status =
        api.copy_d2h(stream, host_.data(), static_cast<char*>(out.pointer) + out.extent, out.guard);
    if (status == TDM_OK) status = api.stream_synchronize(stream);
    if (status != TDM_OK)
      return make_error(node + " failed on " + device_->id() + ": " + last_error_text(silent_failure(status)),
                        status);
    size_t first = out.guard, last = 0, changed = 0;
    for (size_t i = 0; i < out.guard; ++i)
      if (host_[i] != guard_byte(i)) first = std::min(first, i), last = i, ++changed;
    if (changed > 0)
      return plugin_failure("--check-bounds: " + node + " on " + device_->id() + " wrote past the end of '" +
                                out.value + "' (" + std::to_string(out.extent) +
                                " bytes): " + std::to_string(changed) + " byte" + (changed == 1 ? "" : "s") +
                                " changed, +" + std::to_string(first) + "..+" + std::to_string(last) +
                                " after it; the kernel of backend " + device_->backend().name +
                                " writes outside its output",
                            TDM_INTERNAL);
  }
  return {};
}

Result<void> NumericsGuard::poison(tdm_stream* stream, const std::vector<GuardedOutput>& outputs) {
  if (options_.bounds)
    if (auto r = fill_guards(stream, outputs); !r) return r;
  if (!options_.poison) return {};
  const tdm_backend_api& api = *device_->backend().backend;
  for (const GuardedOutput& out : outputs) {
    if (out.in_place || out.bytes == 0 || !is_floating(out.dtype)) continue;
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
                            " failed: " + last_error_text(silent_failure(status)),
                        status);
  }
  return {};
}

Result<void> NumericsGuard::check(tdm_stream* stream, const std::vector<GuardedOutput>& outputs,
                                  const std::string& node, tdm_phase phase) {
  if (options_.bounds)
    if (auto r = check_guards(stream, outputs, node); !r) return r;
  if (!options_.check || (phase == TDM_PHASE_BACKWARD && !options_.check_backward)) return {};
  const tdm_backend_api& api = *device_->backend().backend;
  for (const GuardedOutput& out : outputs) {
    if (out.bytes == 0 || !is_floating(out.dtype)) continue;
    host_.resize(out.bytes);
    clear_last_error();
    tdm_status status = api.copy_d2h(stream, host_.data(), out.pointer, out.bytes);
    if (status == TDM_OK) status = api.stream_synchronize(stream);
    if (status != TDM_OK)
      return make_error(node + " failed on " + device_->id() + ": " + last_error_text(silent_failure(status)),
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
