// The catalogue's assembly, the catalog's op list, and input drawing.
#include <cstdio>

#include "tandem/conformance/cases.hpp"

namespace tandem::conformance {

Case& Case::in(tdm_dtype d, std::vector<int64_t> dims, Fill fill) {
  inputs.push_back({TensorShape(d, std::move(dims)), fill});
  return *this;
}
Case& Case::none() {
  inputs.push_back({TensorShape(TDM_DTYPE_INVALID, {}), Fill()});
  return *this;
}
Case& Case::out(tdm_dtype d, std::vector<int64_t> dims) {
  outputs.emplace_back(d, std::move(dims));
  return *this;
}
Case& Case::no_out() {
  outputs.emplace_back(TDM_DTYPE_INVALID, std::vector<int64_t>{});
  return *this;
}
Case& Case::alias(size_t output, size_t input) {
  options.in_place.emplace_back(output, input);
  return *this;
}

std::string Case::label() const {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorShape& t = inputs[i].shape;
    s += i ? "," : "";
    if (t.dtype == TDM_DTYPE_INVALID) {
      s += "-";
      continue;
    }
    s += dims_str(t.dims);
    if (t.dtype != dtype) s += std::string(":") + dtype_name(t.dtype);
  }
  if (inputs.empty() && !outputs.empty()) s += "->" + dims_str(outputs[0].dims);
  // A cast's target, and a 16-bit case's wide (f32) result.
  const bool wide =
      !outputs.empty() && outputs[0].dtype == TDM_F32 && (dtype == TDM_BF16 || dtype == TDM_F16);
  if ((op == "cast" && !outputs.empty()) || wide) s += std::string("->") + dtype_name(outputs[0].dtype);
  if (!attrs.empty()) s += " " + attrs.str();
  for (auto [o, i] : options.in_place) s += " inplace:" + std::to_string(o) + "=" + std::to_string(i);
  return s;
}

uint64_t Case::seed() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the case's identity
  for (char ch : op + "/" + dtype_name(dtype) + "/" + label()) h = (h ^ uint8_t(ch)) * 1099511628211ull;
  return h;
}

std::vector<HostTensor> make_inputs(const Case& c) {
  Rng rng(c.seed());
  std::vector<HostTensor> in;
  for (const InputSpec& s : c.inputs)
    in.push_back(s.shape.dtype == TDM_DTYPE_INVALID ? HostTensor()
                                                    : HostTensor::random(s.shape, s.fill, rng));
  if (c.fixup != nullptr) c.fixup(c, in);
  return in;
}

const std::vector<Case>& catalogue() {
  static const std::vector<Case> all = [] {
    std::vector<Case> v;
    add_dense_cases(v);
    add_nn_cases(v);
    add_tensor_cases(v);
    add_quant_cases(v);
    add_transformer_cases(v);
    return v;
  }();
  return all;
}

const std::vector<std::string>& catalog_ops() {
  static const std::vector<std::string> ops = {"matmul",
                                               "linear",
                                               "linear_grad_input",
                                               "linear_grad_weight",
                                               "conv2d",
                                               "conv2d_grad_input",
                                               "conv2d_grad_weight",
                                               "max_pool2d",
                                               "max_pool2d_grad",
                                               "avg_pool2d",
                                               "avg_pool2d_grad",
                                               "relu",
                                               "leaky_relu",
                                               "gelu",
                                               "tanh",
                                               "sigmoid",
                                               "silu",
                                               "relu_grad",
                                               "leaky_relu_grad",
                                               "gelu_grad",
                                               "tanh_grad",
                                               "sigmoid_grad",
                                               "silu_grad",
                                               "softmax",
                                               "log_softmax",
                                               "softmax_grad",
                                               "log_softmax_grad",
                                               "softmax_cross_entropy",
                                               "softmax_cross_entropy_grad",
                                               "count_correct",
                                               "layer_norm",
                                               "layer_norm_grad",
                                               "batch_norm_train",
                                               "batch_norm_inference",
                                               "batch_norm_grad",
                                               "embedding",
                                               "embedding_grad",
                                               "dropout",
                                               "dropout_grad",
                                               "add",
                                               "sub",
                                               "mul",
                                               "scale",
                                               "reduce_sum",
                                               "reduce_mean",
                                               "reshape",
                                               "transpose",
                                               "concat",
                                               "cast",
                                               "fill",
                                               "copy",
                                               "sgd_update",
                                               "adamw_update",
                                               "quantize",
                                               "dequantize",
                                               "linear_int8",
                                               "conv2d_int8",
                                               "fake_quant",
                                               "fake_quant_grad",
                                               "rms_norm",
                                               "rms_norm_grad",
                                               "rope",
                                               "rope_grad",
                                               "attention",
                                               "attention_grad"};
  return ops;
}

}  // namespace tandem::conformance
