// Host tensors: storage, element access, filling.
#include "tandem/conformance/host_tensor.hpp"

#include <cmath>
#include <cstring>
#include <numeric>

namespace tandem::conformance {

uint64_t Rng::next() noexcept {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::uniform(double lo, double hi) noexcept {
  return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1p-53;
}

int64_t Rng::integer(int64_t lo, int64_t hi) noexcept {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(next() % span);
}

HostTensor::HostTensor(tdm_dtype dtype, std::vector<int64_t> dims) : dtype_(dtype), dims_(std::move(dims)) {
  bytes_.assign(static_cast<size_t>(numel()) * dtype_size(dtype_), 0);
}

int64_t HostTensor::numel() const noexcept {
  if (!present()) return 0;
  for (int64_t d : dims_)
    if (d < 0) return 0;
  return std::accumulate(dims_.begin(), dims_.end(), int64_t{1}, std::multiplies<int64_t>());
}

double HostTensor::get(int64_t i) const noexcept {
  const uint8_t* p = bytes_.data() + static_cast<size_t>(i) * dtype_size(dtype_);
  auto load = [p](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (dtype_) {
    case TDM_F32:
      return load(0.0f);
    case TDM_F64:
      return load(0.0);
    case TDM_F16:
      return f16_to_f32(load(uint16_t{}));
    case TDM_BF16:
      return bf16_to_f32(load(uint16_t{}));
    case TDM_S8:
      return load(int8_t{});
    case TDM_U8:
      return load(uint8_t{});
    case TDM_S32:
      return load(int32_t{});
    case TDM_S64:
      return static_cast<double>(load(int64_t{}));
    default:
      return std::nan("");
  }
}

void HostTensor::set(int64_t i, double v) noexcept {
  uint8_t* p = bytes_.data() + static_cast<size_t>(i) * dtype_size(dtype_);
  auto store = [p](auto value) { std::memcpy(p, &value, sizeof value); };
  switch (dtype_) {
    case TDM_F32:
      store(static_cast<float>(v));
      break;
    case TDM_F64:
      store(v);
      break;
    // Via f32: double rounding is possible only for values that are exact
    // ties in f32 and not in f64 — the kit draws none such.
    case TDM_F16:
      store(f32_to_f16(static_cast<float>(v)));
      break;
    case TDM_BF16:
      store(f32_to_bf16(static_cast<float>(v)));
      break;
    case TDM_S8:
      store(static_cast<int8_t>(std::nearbyint(v)));
      break;
    case TDM_U8:
      store(static_cast<uint8_t>(std::nearbyint(v)));
      break;
    case TDM_S32:
      store(static_cast<int32_t>(std::nearbyint(v)));
      break;
    case TDM_S64:
      store(static_cast<int64_t>(std::nearbyint(v)));
      break;
    default:
      break;
  }
}

std::vector<double> HostTensor::to_f64() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = get(i);
  return out;
}

HostTensor HostTensor::from_values(tdm_dtype dtype, std::vector<int64_t> dims,
                                   const std::vector<double>& values) {
  HostTensor t(dtype, std::move(dims));
  for (int64_t i = 0; i < t.numel() && static_cast<size_t>(i) < values.size(); ++i)
    t.set(i, values[static_cast<size_t>(i)]);
  return t;
}

HostTensor HostTensor::cast(tdm_dtype dtype) const {
  return from_values(dtype, dims_, to_f64());
}

bool HostTensor::bitwise_equal(const HostTensor& o) const noexcept {
  return dtype_ == o.dtype_ && dims_ == o.dims_ && bytes_ == o.bytes_;
}

HostTensor HostTensor::random(const TensorShape& shape, const Fill& fill, Rng& rng) {
  HostTensor t(shape);
  const int64_t n = t.numel();
  switch (fill.kind) {
    case Fill::uniform:
      for (int64_t i = 0; i < n; ++i) t.set(i, rng.uniform(fill.lo, fill.hi));
      break;
    case Fill::integers:
      for (int64_t i = 0; i < n; ++i)
        t.set(i,
              static_cast<double>(rng.integer(static_cast<int64_t>(fill.lo), static_cast<int64_t>(fill.hi))));
      break;
    case Fill::constant:
      for (int64_t i = 0; i < n; ++i) t.set(i, fill.lo);
      break;
    case Fill::distinct: {
      // A shuffled ramp per [H,W] plane, spaced 1/16: integers times a power
      // of two, exact in bf16 while the plane has at most 256 elements.
      const size_t r = shape.dims.size();
      int64_t plane = r >= 2 ? shape.dims[r - 1] * shape.dims[r - 2] : n;
      if (plane <= 0) plane = 1;
      std::vector<int64_t> perm(static_cast<size_t>(plane));
      for (int64_t base = 0; base < n; base += plane) {
        std::iota(perm.begin(), perm.end(), int64_t{0});
        for (int64_t i = plane - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(rng.integer(0, i))]);
        for (int64_t i = 0; i < plane && base + i < n; ++i)
          t.set(base + i, static_cast<double>(perm[size_t(i)] - plane / 2) / 16.0);
      }
      break;
    }
  }
  return t;
}

std::string dims_str(const std::vector<int64_t>& dims) {
  if (dims.empty()) return "[]";
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(dims[i]);
  }
  return s;
}

// Not TensorShape::str(): GCC 12's -Wrestrict misfires on its string
// concatenation at -O3.
std::string HostTensor::str() const {
  if (!present()) return "absent";
  return std::string(dtype_name(dtype_)) + "[" + dims_str(dims_) + "]";
}

}  // namespace tandem::conformance
