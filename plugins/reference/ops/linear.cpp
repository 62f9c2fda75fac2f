// Reference backend — linear (forward with fused activation) and its
// gradients with respect to input and to weight and bias.
//
// Plain triple loops; dot products accumulate in double.
#include <cmath>

#include "common.hpp"

namespace tandem::reference {
namespace {

enum class Act { None, Relu, Tanh, Sigmoid };

Act parse_activation(const Check& c) {
  const std::string a = c.string_attr("activation");
  if (a == "none") return Act::None;
  if (a == "relu") return Act::Relu;
  if (a == "tanh") return Act::Tanh;
  return Act::Sigmoid;  // the catalog allows none, relu, tanh and sigmoid only
}

// ---- linear: y = act(x · wᵀ + bias)
std::unique_ptr<Kernel> linear(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const int64_t N = c.in(0).dims[0], I = c.in(0).dims[1];
  const int64_t O = c.in(1).dims[0];
  // A wide output (f32 from bf16/f16 operands) takes its bias in f32 and
  // is the compute type's sum, not rounded to the operands' dtype.
  const tdm_dtype yt = c.product_output_dtype(0, dt);
  const bool has_bias = c.has_input(2);
  const Act act = parse_activation(c);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> x = load<T>(in[0], dt, N * I), w = load<T>(in[1], dt, O * I);
      const std::vector<T> bias = has_bias ? load<T>(in[2], yt, O) : std::vector<T>(size_t(O), T(0));
      std::vector<T> y(size_t(N * O));
      for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < O; ++o) {
          double acc = 0;
          for (int64_t i = 0; i < I; ++i) acc += double(x[size_t(n * I + i)]) * double(w[size_t(o * I + i)]);
          T v = T(T(acc) + bias[size_t(o)]);
          switch (act) {
            case Act::None:
              break;
            case Act::Relu:
              v = v > T(0) ? v : T(0);
              break;
            case Act::Tanh:
              v = std::tanh(v);
              break;
            case Act::Sigmoid:
              v = T(1) / (T(1) + std::exp(-v));
              break;
          }
          y[size_t(n * O + o)] = v;
        }
      store(out[0], yt, y);
    });
  });
}

// ---- linear_grad_input: dx[N,I] = dy[N,O] · w[O,I] (+ addend[N,I])
std::unique_ptr<Kernel> linear_grad_input(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const int64_t N = c.in(0).dims[0], O = c.in(0).dims[1], I = c.in(1).dims[1];
  const bool addend = c.has_input(2);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> dy = load<T>(in[0], dt, N * O), w = load<T>(in[1], dt, O * I);
      const std::vector<T> base = addend ? load<T>(in[2], dt, N * I) : std::vector<T>{};
      std::vector<T> dx(size_t(N * I));
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < I; ++i) {
          double acc = addend ? double(base[size_t(n * I + i)]) : 0.0;
          for (int64_t o = 0; o < O; ++o) acc += double(dy[size_t(n * O + o)]) * double(w[size_t(o * I + i)]);
          dx[size_t(n * I + i)] = T(acc);
        }
      store(out[0], dt, dx);
    });
  });
}

// ---- linear_grad_weight: dw[O,I] = dyᵀ · x, dbias[O] = Σ_n dy
std::unique_ptr<Kernel> linear_grad_weight(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const int64_t N = c.in(0).dims[0], O = c.in(0).dims[1], I = c.in(1).dims[1];
  const tdm_dtype wt = c.product_output_dtype(0, dt);  // f32 for a wide output
  const bool has_bias = c.int_attr("has_bias") != 0;   // the shape rule: dbias present exactly then
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> dy = load<T>(in[0], dt, N * O), x = load<T>(in[1], dt, N * I);
      std::vector<T> dw(size_t(O * I)), db(static_cast<size_t>(O));
      for (int64_t o = 0; o < O; ++o) {
        for (int64_t i = 0; i < I; ++i) {
          double acc = 0;
          for (int64_t n = 0; n < N; ++n) acc += double(dy[size_t(n * O + o)]) * double(x[size_t(n * I + i)]);
          dw[size_t(o * I + i)] = T(acc);
        }
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) acc += double(dy[size_t(n * O + o)]);
        db[size_t(o)] = T(acc);
      }
      store(out[0], wt, dw);
      if (has_bias) store(out[1], wt, db);
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("linear", linear);
  r.add("linear_grad_input", linear_grad_input);
  r.add("linear_grad_weight", linear_grad_weight);
});

}  // namespace

}  // namespace tandem::reference
