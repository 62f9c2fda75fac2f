// Reference backend — add, sub, mul (numpy broadcasting) and scale.
//
// Floating dtypes compute in the compute type; s32 computes in 64-bit
// integers and wraps modulo 2^32 like two's-complement hardware.
#include <cstring>

#include "common.hpp"

namespace tandem::reference {
namespace {

enum class Binary { Add, Sub, Mul };

template <class T>
T apply(Binary op, T a, T b) {
  switch (op) {
    case Binary::Add:
      return a + b;
    case Binary::Sub:
      return a - b;
    case Binary::Mul:
      return a * b;
  }
  return a;
}

int32_t wrap32(int64_t v) {
  const uint32_t bits = static_cast<uint32_t>(static_cast<uint64_t>(v));
  int32_t out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

std::unique_ptr<Kernel> binary(const OpView& view, Binary op) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, {TDM_F32, TDM_BF16, TDM_F16, TDM_F64, TDM_S32});
  const Dims a = c.in(0).dims, b = c.in(1).dims;
  Dims y;
  broadcast_shapes(a, b, y);  // the shape rule has checked that they broadcast
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const int64_t n = numel(y);
    if (dt == TDM_S32) {
      const auto av = load_indices(in[0], dt, numel(a)), bv = load_indices(in[1], dt, numel(b));
      std::vector<int32_t> yv(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        yv[size_t(i)] =
            wrap32(apply(op, av[size_t(broadcast_source(i, y, a))], bv[size_t(broadcast_source(i, y, b))]));
      std::memcpy(out[0], yv.data(), yv.size() * sizeof(int32_t));
      return;
    }
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> av = load<T>(in[0], dt, numel(a)), bv = load<T>(in[1], dt, numel(b));
      std::vector<T> yv(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        yv[size_t(i)] =
            apply(op, av[size_t(broadcast_source(i, y, a))], bv[size_t(broadcast_source(i, y, b))]);
      store(out[0], dt, yv);
    });
  });
}

// y = alpha·x + beta
std::unique_ptr<Kernel> scale(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const Dims shape = c.in(0).dims;
  const double alpha = c.float_attr("alpha"), beta = c.float_attr("beta");
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> v = load<T>(in[0], dt, numel(shape));
      for (T& e : v) e = T(alpha) * e + T(beta);
      store(out[0], dt, v);
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("add", [](const OpView& v, size_t&) { return binary(v, Binary::Add); });
  r.add("sub", [](const OpView& v, size_t&) { return binary(v, Binary::Sub); });
  r.add("mul", [](const OpView& v, size_t&) { return binary(v, Binary::Mul); });
  r.add("scale", scale);
});

}  // namespace

}  // namespace tandem::reference
