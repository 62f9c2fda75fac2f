// CUDA backend — activations and their gradients, per element, in f32.
// Forward and backward side by side (llm.c style). The formulas are the
// catalog's (sdk/ops.md): gelu "none" is x·Φ(x) with the error function,
// gelu "tanh" is the usual tanh approximation; tanh_grad and sigmoid_grad
// take the forward output y, relu_grad, leaky_relu_grad, gelu_grad and
// silu_grad and softplus_grad take the input x. An activation's parameters
// (leaky_relu's slope, softplus's beta and threshold) are the arguments p0,
// p1: the float attributes of its catalog entry, in order.
#ifndef TANDEM_CUDA_MATH_ACTIVATION_HPP
#define TANDEM_CUDA_MATH_ACTIVATION_HPP

#include <cmath>

#include "math/common.hpp"

namespace tandem::cuda::math {

enum class Act : int {
  None = 0,
  Relu = 1,
  Tanh = 2,
  Sigmoid = 3,
  Gelu = 4,
  GeluTanh = 5,
  LeakyRelu = 6,
  Silu = 7,
  Softplus = 8
};

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

TDM_HD inline float relu(float x) {
  return x > 0.0f ? x : 0.0f;
}
// The catalog takes relu'(0) = 0.
TDM_HD inline float relu_grad(float dy, float x) {
  return x > 0.0f ? dy : 0.0f;
}

TDM_HD inline float leaky_relu(float x, float slope) {
  return x > 0.0f ? x : slope * x;
}
// The catalog takes the slope at x = 0, as for relu'(0) = 0.
TDM_HD inline float leaky_relu_grad(float dy, float x, float slope) {
  return x > 0.0f ? dy : slope * dy;
}

TDM_HD inline float sigmoid(float x) {
  // Split by sign so exp never overflows.
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  const float e = expf(x);
  return e / (1.0f + e);
}
TDM_HD inline float sigmoid_grad(float dy, float y) {
  return dy * y * (1.0f - y);
}

// silu(x) = x·sigmoid(x); the overflow-safe sigmoid above keeps it finite
// for large |x| (x·0 for x → −∞, x·1 for x → +∞).
TDM_HD inline float silu(float x) {
  return x * sigmoid(x);
}
// d/dx x·s(x) = s + x·s·(1 − s) = s·(1 + x·(1 − s)), the catalog's form.
TDM_HD inline float silu_grad(float dy, float x) {
  const float s = sigmoid(x);
  return dy * s * (1.0f + x * (1.0f - s));
}

// softplus(x) = log(1 + exp(βx))/β, x itself where βx > threshold (torch's
// Softplus); as (max(z, 0) + log1p(exp(−|z|)))/β, z = βx, it never
// overflows. Its derivative is sigmoid(βx), 1 above the threshold.
TDM_HD inline float softplus(float x, float beta, float threshold) {
  const float z = beta * x;
  return z > threshold ? x : (fmaxf(z, 0.0f) + log1pf(expf(-fabsf(z)))) / beta;
}
TDM_HD inline float softplus_grad(float dy, float x, float beta, float threshold) {
  const float z = beta * x;
  return z > threshold ? dy : dy * sigmoid(z);
}

TDM_HD inline float tanh_act(float x) {
  return tanhf(x);
}
TDM_HD inline float tanh_grad(float dy, float y) {
  return dy * (1.0f - y * y);
}

TDM_HD inline float gelu(float x) {
  return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
}
TDM_HD inline float gelu_grad(float dy, float x) {
  const float cdf = 0.5f * (1.0f + erff(x * kInvSqrt2));
  const float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
  return dy * (cdf + x * pdf);
}

TDM_HD inline float gelu_tanh(float x) {
  const float inner = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}
TDM_HD inline float gelu_tanh_grad(float dy, float x) {
  const float inner = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float t = tanhf(inner);
  const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner);
}

// The catalog's activations this backend implements, by op name (the
// gradient is the name with "_grad"); ops/activation.cu registers them.
struct NamedAct {
  const char* op;
  Act act;
};
inline constexpr NamedAct kActivations[] = {{"relu", Act::Relu},        {"leaky_relu", Act::LeakyRelu},
                                            {"gelu", Act::Gelu},        {"tanh", Act::Tanh},
                                            {"sigmoid", Act::Sigmoid},  {"silu", Act::Silu},
                                            {"softplus", Act::Softplus}};

// Forward by code, for the fused linear/conv epilogue and the unary kernel.
TDM_HD inline float activate(Act a, float x, float p0 = 0.0f, float p1 = 0.0f) {
  switch (a) {
    case Act::Relu:
      return relu(x);
    case Act::LeakyRelu:
      return leaky_relu(x, p0);
    case Act::Tanh:
      return tanh_act(x);
    case Act::Sigmoid:
      return sigmoid(x);
    case Act::Gelu:
      return gelu(x);
    case Act::GeluTanh:
      return gelu_tanh(x);
    case Act::Silu:
      return silu(x);
    case Act::Softplus:
      return softplus(x, p0, p1);
    default:
      return x;
  }
}

// Backward by code; `v` is x for relu/leaky_relu/gelu/silu and y for
// tanh/sigmoid.
TDM_HD inline float activate_grad(Act a, float dy, float v, float p0 = 0.0f, float p1 = 0.0f) {
  switch (a) {
    case Act::Relu:
      return relu_grad(dy, v);
    case Act::LeakyRelu:
      return leaky_relu_grad(dy, v, p0);
    case Act::Tanh:
      return tanh_grad(dy, v);
    case Act::Sigmoid:
      return sigmoid_grad(dy, v);
    case Act::Gelu:
      return gelu_grad(dy, v);
    case Act::GeluTanh:
      return gelu_tanh_grad(dy, v);
    case Act::Silu:
      return silu_grad(dy, v);
    case Act::Softplus:
      return softplus_grad(dy, v, p0, p1);
    default:
      return dy;
  }
}

}  // namespace tandem::cuda::math

#endif  // TANDEM_CUDA_MATH_ACTIVATION_HPP
