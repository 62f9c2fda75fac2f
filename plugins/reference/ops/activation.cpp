// Reference backend — elementwise activations and their gradients.
//
// relu(x) = max(x, 0); relu_grad = dy where x > 0, else 0 (also 0 at x == 0).
// leaky_relu(x) = x where x > 0, else negative_slope·x; its gradient is dy
// where x > 0, else negative_slope·dy (the slope also at x == 0).
// gelu exact: 0.5·x·(1 + erf(x/√2)); tanh approximation:
//   0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
// silu(x) = x·sigmoid(x); its derivative is s·(1 + x·(1 − s)), s = sigmoid(x).
// softplus(x) = log(1 + exp(βx))/β, and x itself where βx > threshold
// (torch.nn.Softplus); computed as (max(z, 0) + log1p(exp(−|z|)))/β, z = βx,
// which never overflows; its derivative is sigmoid(βx), 1 above the threshold.
// tanh_grad and sigmoid_grad take the forward output y.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "common.hpp"

namespace tandem::reference {
namespace {

enum class Fn { Relu, LeakyRelu, Gelu, GeluTanh, Tanh, Sigmoid, Silu, Softplus };

// A function and its parameters (leaky_relu's negative_slope as a;
// softplus's beta and threshold as a and b).
struct Act {
  Fn fn;
  double a = 0, b = 0;
};

template <class T>
T forward(Act a, T x) {
  const T half(0.5), one(1);
  switch (a.fn) {
    case Fn::Relu:
      return x > T(0) ? x : T(0);
    case Fn::LeakyRelu:
      return x > T(0) ? x : T(a.a) * x;
    case Fn::Gelu:
      return half * x * (one + std::erf(x / std::numbers::sqrt2_v<T>));
    case Fn::GeluTanh: {
      const T k = std::sqrt(T(2) / std::numbers::pi_v<T>);
      return half * x * (one + std::tanh(k * (x + T(0.044715) * x * x * x)));
    }
    case Fn::Tanh:
      return std::tanh(x);
    case Fn::Sigmoid:
      return one / (one + std::exp(-x));
    case Fn::Silu:
      return x / (one + std::exp(-x));
    case Fn::Softplus: {
      const T z = T(a.a) * x;
      return z > T(a.b) ? x : (std::max(z, T(0)) + std::log1p(std::exp(-std::abs(z)))) / T(a.a);
    }
  }
  return x;
}

// d forward / d(the op's second input): x for relu/leaky_relu/gelu/silu, y for
// tanh/sigmoid.
template <class T>
T derivative(Act a, T v) {
  const T half(0.5), one(1);
  switch (a.fn) {
    case Fn::Relu:
      return v > T(0) ? one : T(0);
    case Fn::LeakyRelu:
      return v > T(0) ? one : T(a.a);
    case Fn::Gelu: {
      const T pdf = std::exp(-half * v * v) / std::sqrt(T(2) * std::numbers::pi_v<T>);
      return half * (one + std::erf(v / std::numbers::sqrt2_v<T>)) + v * pdf;
    }
    case Fn::GeluTanh: {
      const T k = std::sqrt(T(2) / std::numbers::pi_v<T>);
      const T t = std::tanh(k * (v + T(0.044715) * v * v * v));
      return half * (one + t) + half * v * (one - t * t) * k * (one + T(3 * 0.044715) * v * v);
    }
    case Fn::Tanh:
      return one - v * v;
    case Fn::Sigmoid:
      return v * (one - v);
    case Fn::Silu: {
      const T s = one / (one + std::exp(-v));
      return s * (one + v * (one - s));
    }
    case Fn::Softplus: {
      const T z = T(a.a) * v;
      return z > T(a.b) ? one : one / (one + std::exp(-z));
    }
  }
  return one;
}

// The attributes complete the function: gelu's approximation, leaky_relu's
// slope, softplus's beta and threshold (the registry has checked them
// against the catalog).
Act with_attributes(const Check& c, Fn fn) {
  if (fn == Fn::LeakyRelu) return {fn, c.float_attr("negative_slope")};
  if (fn == Fn::Softplus) return {fn, c.float_attr("beta"), c.float_attr("threshold")};
  if (fn == Fn::Gelu && c.string_attr("approximate") == "tanh") return {Fn::GeluTanh};
  return {fn};
}

std::unique_ptr<Kernel> unary(const OpView& view, Fn fn) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const Act act = with_attributes(c, fn);
  const Dims shape = c.in(0).dims;
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> v = load<T>(in[0], dt, numel(shape));
      for (T& e : v) e = forward(act, e);
      store(out[0], dt, v);
    });
  });
}

// dx = dy · derivative(second input)
std::unique_ptr<Kernel> gradient(const OpView& view, Fn fn) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const Act act = with_attributes(c, fn);
  const Dims shape = c.in(0).dims;
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> dy = load<T>(in[0], dt, numel(shape)), v = load<T>(in[1], dt, numel(shape));
      std::vector<T> dx(dy.size());
      for (size_t i = 0; i < dx.size(); ++i) dx[i] = dy[i] * derivative(act, v[i]);
      store(out[0], dt, dx);
    });
  });
}

// The factories of op and op_grad for each function: one lookup from the
// name (the registry's) to the kernel.
template <Fn F>
std::unique_ptr<Kernel> unary_of(const OpView& v, size_t&) {
  return unary(v, F);
}
template <Fn F>
std::unique_ptr<Kernel> gradient_of(const OpView& v, size_t&) {
  return gradient(v, F);
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("relu", unary_of<Fn::Relu>);
  r.add("leaky_relu", unary_of<Fn::LeakyRelu>);
  r.add("gelu", unary_of<Fn::Gelu>);
  r.add("tanh", unary_of<Fn::Tanh>);
  r.add("sigmoid", unary_of<Fn::Sigmoid>);
  r.add("silu", unary_of<Fn::Silu>);
  r.add("softplus", unary_of<Fn::Softplus>);
  r.add("relu_grad", gradient_of<Fn::Relu>);
  r.add("leaky_relu_grad", gradient_of<Fn::LeakyRelu>);
  r.add("gelu_grad", gradient_of<Fn::Gelu>);
  r.add("tanh_grad", gradient_of<Fn::Tanh>);
  r.add("sigmoid_grad", gradient_of<Fn::Sigmoid>);
  r.add("silu_grad", gradient_of<Fn::Silu>);
  r.add("softplus_grad", gradient_of<Fn::Softplus>);
});

}  // namespace

}  // namespace tandem::reference
