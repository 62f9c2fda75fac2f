// The catalogue's assembly, the catalog's op list, and input drawing.
#include <cstdio>

#include "tandem/conformance/cases.hpp"
#include "tandem/op_catalog.hpp"

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

std::vector<Attrs> activation_attr_variants(const catalog::Op& op) {
  std::vector<Attrs> variants{Attrs()};
  for (const catalog::Attribute& a : op.attrs) {
    if (a.type == TDM_ATTR_STRING)
      for (const std::string& choice : a.choices)
        if (choice != a.default_text) variants.push_back(Attrs().string(a.name, choice));
    if (a.type != TDM_ATTR_FLOAT || a.kind != catalog::Attribute::Default::literal) continue;
    const auto valid = [&](double x) { return (a.lo_open ? x > a.lo : x >= a.lo) && x <= a.hi; };
    const double d = a.float_default;
    std::vector<double> others;
    for (double x : {0.0, 2 * d + 0.2})
      if (x != d && valid(x)) others.push_back(x);
    if (others.empty() && valid(d / 4)) others.push_back(d / 4);
    for (double x : others) variants.push_back(Attrs().number(a.name, x));
  }
  return variants;
}

const std::vector<std::string>& catalog_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> names;
    for (const catalog::Op& op : catalog::ops()) names.push_back(op.name);
    return names;
  }();
  return ops;
}

}  // namespace tandem::conformance
