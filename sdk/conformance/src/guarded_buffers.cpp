#include "guarded_buffers.hpp"

#include <algorithm>
#include <array>

namespace tandem::conformance {
namespace {

// Not one repeated byte, so a kernel storing a constant (0, or a pattern of
// its own) still changes some byte of whatever it overwrites.
const std::array<uint8_t, kGuardBytes>& guard_pattern() {
  static const std::array<uint8_t, kGuardBytes> pattern = [] {
    std::array<uint8_t, kGuardBytes> p{};
    for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i * 131u + 0x5Bu);
    return p;
  }();
  return pattern;
}

// "16 bytes changed, +0..+15 after it" (`after`: the guard after the
// buffer, byte i at distance i from its end) or "3 bytes changed, -4..-2
// before it" (byte i at distance kGuardBytes - i before its start); "" when
// intact.
std::string changed_range(const std::vector<uint8_t>& guard, bool after) {
  const auto& pattern = guard_pattern();
  size_t near = kGuardBytes, far = 0, count = 0;
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (guard[i] == pattern[i]) continue;
    const size_t distance = after ? i : kGuardBytes - i;
    near = std::min(near, distance);
    far = std::max(far, distance);
    ++count;
  }
  if (count == 0) return "";
  const std::string sign = after ? "+" : "-";
  return std::to_string(count) + " byte" + (count == 1 ? "" : "s") + " changed, " + sign +
         std::to_string(after ? near : far) + ".." + sign + std::to_string(after ? far : near) +
         (after ? " after it" : " before it");
}

}  // namespace

GuardedBuffers::~GuardedBuffers() {
  const tdm_backend_api& api = plugin_.api();
  call_plugin("stream_synchronize", [&] { return api.stream_synchronize(plugin_.stream()); });
  for (const Buffer& b : buffers_) call_plugin("mem_free", [&] { api.mem_free(plugin_.device(), b.base); });
}

tdm_status GuardedBuffers::allocate(size_t bytes, std::string what, void** out) {
  const tdm_backend_api& api = plugin_.api();
  void* base = nullptr;
  tdm_status status = call_plugin(
      "mem_alloc", [&] { return api.mem_alloc(plugin_.device(), bytes + 2 * kGuardBytes, &base); });
  if (status != TDM_OK) return status;
  if (base == nullptr) return TDM_INTERNAL;
  Buffer& b = buffers_.emplace_back(Buffer{static_cast<uint8_t*>(base), bytes, std::move(what)});
  const uint8_t* pattern = guard_pattern().data();
  for (uint8_t* guard : {b.base, b.base + kGuardBytes + bytes}) {
    status =
        call_plugin("copy_h2d", [&] { return api.copy_h2d(plugin_.stream(), guard, pattern, kGuardBytes); });
    if (status != TDM_OK) return status;
  }
  *out = b.base + kGuardBytes;
  return TDM_OK;
}

std::string GuardedBuffers::check_guards() {
  const tdm_backend_api& api = plugin_.api();
  std::vector<std::vector<uint8_t>> guards(buffers_.size() * 2, std::vector<uint8_t>(kGuardBytes));
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    for (int side = 0; side < 2; ++side) {
      const uint8_t* guard = side == 0 ? b.base : b.base + kGuardBytes + b.bytes;
      const tdm_status status = call_plugin("copy_d2h", [&] {
        return api.copy_d2h(plugin_.stream(), guards[2 * i + side].data(), guard, kGuardBytes);
      });
      if (status != TDM_OK) return "cannot read back the guard regions of " + b.what;
    }
  }
  if (call_plugin("stream_synchronize", [&] { return api.stream_synchronize(plugin_.stream()); }) != TDM_OK)
    return "cannot read back the guard regions (stream_synchronize failed)";
  std::string report;
  for (size_t i = 0; i < buffers_.size(); ++i)
    for (int side = 0; side < 2; ++side) {
      const std::string changed = changed_range(guards[2 * i + side], side == 1);
      if (changed.empty()) continue;
      report += std::string(report.empty() ? "the kernel wrote " : "; ") +
                (side == 1 ? "past the end of " : "before the start of ") + buffers_[i].what + " (" +
                std::to_string(buffers_[i].bytes) + " bytes): " + changed;
    }
  return report;
}

}  // namespace tandem::conformance
