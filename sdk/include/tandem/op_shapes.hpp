// Tandem SDK — the shape rule of every catalog op (sdk/ops.md): from the
// operands' dtypes and dims and the attributes, the outputs the op has, or
// why the description is wrong. Part of the catalog (tandem/op_catalog.hpp
// says what an op is; this says what it computes into), so the host's graph
// builder and every backend's kit (tandem/backend_kit.hpp) check a node the
// same way. Header-only, standard library only.
//
//   const catalog::Op& op = *catalog::find("linear");
//   shapes::Query q(op, {&x, &w, nullptr}, attrs, n_attrs, declared);
//   shapes::Outputs y = shapes::infer(q);  // throws shapes::Invalid
//
// The rules live by catalog section in tandem/op_shapes_products.hpp
// (matmul, linear, conv2d, pooling, INT8 and quantization),
// tandem/op_shapes_layers.hpp (attention, normalization, embedding, rope,
// loss, dropout) and tandem/op_shapes_tensor.hpp (activations, softmax,
// elementwise, reduce, layout ops, cast, optimizers).
#ifndef TANDEM_OP_SHAPES_HPP
#define TANDEM_OP_SHAPES_HPP

#include <algorithm>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "tandem/op_shape_query.hpp"
#include "tandem/op_shapes_layers.hpp"
#include "tandem/op_shapes_products.hpp"
#include "tandem/op_shapes_tensor.hpp"

namespace tandem::shapes {

namespace detail {
inline const std::map<std::string_view, Rule>& rule_table() {
  static const std::map<std::string_view, Rule> table = [] {
    std::map<std::string_view, Rule> t;
    for (std::span<const RuleEntry> list :
         {std::span<const RuleEntry>(kProductRules), std::span<const RuleEntry>(kLayerRules),
          std::span<const RuleEntry>(kTensorRules)})
      for (const RuleEntry& e : list)
        if (!t.emplace(e.op, e.rule).second)
          throw std::logic_error(std::string("tandem/op_shapes.hpp: op '") + e.op + "' has two shape rules");
    return t;
  }();
  return table;
}
}  // namespace detail

// The rule of catalog op `op`: its own, else its section's (one rule for
// every activation, so an activation added to the catalog needs none);
// nullptr for an op outside the catalog. sdk.op_shapes checks that every
// catalog op has one.
inline Rule rule(std::string_view op) {
  const auto& t = detail::rule_table();
  if (const auto it = t.find(op); it != t.end()) return it->second;
  const catalog::Op* entry = catalog::find(op);
  if (entry == nullptr) return nullptr;
  for (const RuleEntry& e : kTensorSectionRules)
    if (entry->section == e.op) return e.rule;
  return nullptr;
}

// The dtypes the catalog writes in q's operands: a dtype written in an
// operand is fixed (an f32 one is f64 over f64 data, as the reference's
// gradient checks run), and every other input has the data's dtype, the
// first such input's. A wide product's optional inputs follow its output
// instead, which its rule checks.
inline void check_operand_dtypes(const Query& q) {
  const catalog::Op& op = q.op();
  const TensorShape* data = nullptr;
  const char* data_name = "";
  for (size_t i = 0; i < q.n_inputs() && !op.inputs.empty(); ++i) {
    const TensorShape* t = q.optional(i);
    if (t == nullptr) continue;
    const catalog::Operand& spec = op.inputs[std::min(i, op.inputs.size() - 1)];  // the last may repeat
    if (spec.fixed_dtype != TDM_DTYPE_INVALID) {
      const bool f64_stats = spec.fixed_dtype == TDM_F32 && t->dtype == TDM_F64;
      if (t->dtype != spec.fixed_dtype && !f64_stats)
        fail(spec.name + " " + str(*t) + " must be " + dtype_name(spec.fixed_dtype));
    } else if (spec.optional && op.is(TDM_OP_WIDE_PRODUCT)) {
      continue;
    } else if (data == nullptr) {
      data = t;
      data_name = spec.name.c_str();
    } else if (t->dtype != data->dtype) {
      fail(spec.name + " " + str(*t) + " must be " + dtype_name(data->dtype) + ", " + data_name + "'s dtype");
    }
  }
}

// The outputs of q's op; shapes::Invalid when the description breaks the
// rule or the operands' dtypes, std::logic_error when the op has no rule
// (a catalog entry without its rule: a bug in the SDK).
inline Outputs infer(const Query& q) {
  const Rule r = rule(q.op().name);
  if (r == nullptr)
    throw std::logic_error("op '" + q.op().name + "' has no shape rule in tandem/op_shapes.hpp");
  Outputs outs = r(q);
  check_operand_dtypes(q);
  return outs;
}

// An empty string when `declared` are the outputs `want`, else what
// differs. Absent outputs (dtype TDM_DTYPE_INVALID) may trail the ones the
// rule gives, never stand for one.
inline std::string outputs_error(const Outputs& want, const std::vector<TensorShape>& declared) {
  for (size_t j = 0; j < want.size() && j < declared.size(); ++j) {
    if (declared[j].dtype == TDM_DTYPE_INVALID)
      return "output " + std::to_string(j) + " is absent but its inputs give " + str(want[j]);
    if (want[j].dtype != declared[j].dtype || want[j].dims != declared[j].dims)
      return "output " + std::to_string(j) + " is declared " + str(declared[j]) + " but its inputs give " +
             str(want[j]);
  }
  size_t given = declared.size();
  while (given > want.size() && declared[given - 1].dtype == TDM_DTYPE_INVALID) --given;
  if (given != want.size())
    return std::to_string(given) + " outputs declared, the catalog's rule gives " +
           std::to_string(want.size());
  return {};
}

}  // namespace tandem::shapes

#endif  // TANDEM_OP_SHAPES_HPP
