// Reference backend — reshape, transpose, concat, copy, fill.
//
// These move bytes without arithmetic, so they handle every dtype alike.
// reshape and copy tolerate in-place launches (memmove).
#include <cstring>

#include "common.hpp"

namespace tandem::reference {
namespace {

std::unique_ptr<Kernel> reshape(const OpView& view, size_t&) {
  Check c(view);
  c.primary_dtype(0, kAll);
  const size_t bytes = c.in(0).bytes();
  return make_kernel(c, [=](void* const* in, void* const* out) { std::memmove(out[0], in[0], bytes); });
}

std::unique_ptr<Kernel> copy(const OpView& view, size_t&) {
  Check c(view);
  c.primary_dtype(0, kAll);
  const size_t bytes = c.in(0).bytes();
  return make_kernel(c, [=](void* const* in, void* const* out) { std::memmove(out[0], in[0], bytes); });
}

// y.dims[i] = x.dims[perm[i]]; default perm reverses the dims.
std::unique_ptr<Kernel> transpose(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kAll);
  const Dims x = c.in(0).dims;
  Dims reverse;
  for (size_t k = x.size(); k-- > 0;) reverse.push_back(int64_t(k));
  const std::vector<int64_t> perm = c.ints_attr("perm", reverse);  // a permutation (the shape rule)
  Dims y;
  for (int64_t p : perm) y.push_back(x[size_t(p)]);
  const size_t esize = dtype_size(dt);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const Dims xs = strides_of(x);
    const auto* src = static_cast<const char*>(in[0]);
    auto* dst = static_cast<char*>(out[0]);
    for (int64_t i = 0; i < numel(y); ++i) {
      int64_t rest = i, source = 0;
      for (size_t k = y.size(); k-- > 0;) {
        source += (rest % y[k]) * xs[size_t(perm[k])];
        rest /= y[k];
      }
      std::memcpy(dst + size_t(i) * esize, src + size_t(source) * esize, esize);
    }
  });
}

// Inputs laid side by side along `axis`; every other dim agrees (the shape
// rule, which also gives them input 0's dtype).
std::unique_ptr<Kernel> concat(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kAll);
  const Dims first = c.in(0).dims;
  const size_t axis = c.axis(c.int_attr("axis", 0), first.size(), "axis");
  std::vector<int64_t> widths;  // per input: elements per outer index
  for (size_t i = 0; i < view.inputs().size(); ++i) {
    const Dims& dims = c.in(i).dims;
    widths.push_back(numel(Dims(dims.begin() + int64_t(axis), dims.end())));
  }
  const int64_t outer = numel(Dims(first.begin(), first.begin() + int64_t(axis)));
  const size_t esize = dtype_size(dt);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    auto* dst = static_cast<char*>(out[0]);
    for (int64_t o = 0; o < outer; ++o)
      for (size_t i = 0; i < widths.size(); ++i) {
        const size_t chunk = size_t(widths[i]) * esize;
        std::memcpy(dst, static_cast<const char*>(in[i]) + size_t(o) * chunk, chunk);
        dst += chunk;
      }
  });
}

// Every element = value, converted with the cast rules.
std::unique_ptr<Kernel> fill(const OpView& view, size_t&) {
  Check c(view);
  // `like`, when given, only names the memory y overwrites (in place).
  const tdm_dtype dt = c.primary_output_dtype(0, kAll);
  const double value = c.float_attr("value");
  const int64_t n = c.out(0).numel();
  return make_kernel(c, [=](void* const*, void* const* out) {
    for (int64_t i = 0; i < n; ++i) store_double(out[0], dt, i, value);
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("reshape", reshape);
  r.add("copy", copy);
  r.add("transpose", transpose);
  r.add("concat", concat);
  r.add("fill", fill);
});

}  // namespace

}  // namespace tandem::reference
