// Tandem SDK — what a catalog op's shape rule reads (tandem/op_shapes.hpp):
// the operands' dtypes and dims, the attributes with the catalog's
// defaults, the outputs the caller declared, and the arithmetic the rules
// share (broadcasting, convolution windows, axes). Header-only, standard
// library only.
//
// A rule that finds the description wrong throws shapes::Invalid with a
// message that names the operands ("x f32[2,3] and w f32[4,4] must be
// [N, I] and [O, I]"); the caller prefixes the op and node.
#ifndef TANDEM_OP_SHAPE_QUERY_HPP
#define TANDEM_OP_SHAPE_QUERY_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tandem/op_catalog.hpp"
#include "tandem/shape_util.hpp"
#include "tandem/tandem.hpp"

namespace tandem::shapes {

// A description that breaks the op's rule (TDM_INVALID_ARGUMENT).
class Invalid : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};
[[noreturn]] inline void fail(const std::string& what) {
  throw Invalid(what);
}

using Outputs = std::vector<TensorShape>;

// "f32[2,3]"
inline std::string str(const TensorShape& t) {
  return shape_str(t);
}

// The arguments of one rule. Everything is borrowed: the Query lives for
// one call.
class Query {
 public:
  // `inputs`: nullptr for an absent optional input. `attrs`: the node's,
  // already checked against the catalog (types, valid values). `declared`:
  // the outputs the caller gives, which reshape, cast, fill and the
  // products' wide outputs read; may be empty.
  Query(const catalog::Op& op, std::vector<const TensorShape*> inputs, const tdm_attr* attrs, size_t n_attrs,
        const std::vector<TensorShape>& declared)
      : op_(op), inputs_(std::move(inputs)), attrs_(attrs), n_attrs_(n_attrs), declared_(declared) {}

  const catalog::Op& op() const noexcept { return op_; }
  size_t n_inputs() const noexcept { return inputs_.size(); }
  bool present(size_t i) const noexcept { return i < inputs_.size() && inputs_[i] != nullptr; }
  // Input i, which must be present; `name` is its catalog name.
  const TensorShape& input(size_t i, const char* name) const {
    if (!present(i)) fail("input " + std::to_string(i) + " (" + name + ") is missing");
    return *inputs_[i];
  }
  // Input i, or nullptr when absent.
  const TensorShape* optional(size_t i) const noexcept { return present(i) ? inputs_[i] : nullptr; }
  // Declared output j, which the rule needs: it carries `what`.
  const TensorShape& declared(size_t j, const char* what) const {
    if (j >= declared_.size()) fail("output " + std::to_string(j) + " must be given: it carries the " + what);
    return declared_[j];
  }
  // The dtype of a product's output j over operands of dtype `operands`:
  // f32 when the caller declared it f32 over bf16/f16 operands (sdk/ops.md
  // "Wide outputs": the f32 sum is not rounded), else `operands`.
  tdm_dtype product_output_dtype(size_t j, tdm_dtype operands) const noexcept {
    const bool low = operands == TDM_BF16 || operands == TDM_F16;
    return low && j < declared_.size() && declared_[j].dtype == TDM_F32 ? TDM_F32 : operands;
  }

  // Attributes with the catalog's literal default (a rule asking for one
  // the catalog gives no literal default is a bug: std::logic_error).
  int64_t int_attr(const char* n) const { return int_attr(n, spec(n).int_default); }
  double float_attr(const char* n) const { return float_attr(n, spec(n).float_default); }
  std::string string_attr(const char* n) const { return string_attr(n, spec(n).default_text); }
  std::vector<int64_t> ints_attr(const char* n) const { return ints_attr(n, spec(n).ints_default); }
  // With the rule's own fallback, for a default the op computes (pooling's
  // stride is its kernel, transpose's perm reverses the dims).
  int64_t int_attr(const char* n, int64_t fallback) const {
    const tdm_attr* a = attr(n);
    if (a == nullptr) return fallback;
    if (a->type != TDM_ATTR_INT) fail("attribute '" + std::string(n) + "' must be an integer");
    return a->i;
  }
  double float_attr(const char* n, double fallback) const {
    const tdm_attr* a = attr(n);
    if (a == nullptr) return fallback;
    if (a->type == TDM_ATTR_INT) return static_cast<double>(a->i);
    if (a->type != TDM_ATTR_FLOAT) fail("attribute '" + std::string(n) + "' must be a number");
    return a->f;
  }
  std::string string_attr(const char* n, const std::string& fallback) const {
    const tdm_attr* a = attr(n);
    if (a == nullptr) return fallback;
    if (a->type != TDM_ATTR_STRING || a->s == nullptr)
      fail("attribute '" + std::string(n) + "' must be a string");
    return a->s;
  }
  std::vector<int64_t> ints_attr(const char* n, std::vector<int64_t> fallback) const {
    const tdm_attr* a = attr(n);
    if (a == nullptr) return fallback;
    if (a->type == TDM_ATTR_INT) return {a->i};
    if (a->type != TDM_ATTR_INTS || (a->ints == nullptr && a->count != 0))
      fail("attribute '" + std::string(n) + "' must be a list of integers");
    return std::vector<int64_t>(a->ints, a->ints + a->count);
  }

  // A list of numbers (scales): FLOATS as given, one FLOAT or INT as a list
  // of one; empty when absent.
  std::vector<double> floats_attr(const char* n) const {
    const tdm_attr* a = attr(n);
    if (a == nullptr) return {};
    if (a->type == TDM_ATTR_FLOAT) return {a->f};
    if (a->type == TDM_ATTR_INT) return {static_cast<double>(a->i)};
    if (a->type != TDM_ATTR_FLOATS || (a->floats == nullptr && a->count != 0))
      fail("attribute '" + std::string(n) + "' must be a float or a list of floats");
    return std::vector<double>(a->floats, a->floats + a->count);
  }
  bool has_attr(const char* n) const noexcept { return attr(n) != nullptr; }

 private:
  const tdm_attr* attr(const char* n) const noexcept {
    for (size_t i = 0; i < n_attrs_; ++i)
      if (attrs_[i].name != nullptr && std::string_view(attrs_[i].name) == n) return &attrs_[i];
    return nullptr;
  }
  const catalog::Attribute& spec(const char* n) const { return catalog::literal_default(op_.name, n); }

  const catalog::Op& op_;
  std::vector<const TensorShape*> inputs_;
  const tdm_attr* attrs_;
  size_t n_attrs_;
  const std::vector<TensorShape>& declared_;
};

// --- what the rules share ---------------------------------------------------

// Outputs equal to input i (elementwise ops and most gradients).
inline Outputs same_as(const Query& q, size_t i, const char* name) {
  return {q.input(i, name)};
}

// An error unless `t` (named `name`) has want's dtype and dims.
inline void require(const TensorShape& t, const TensorShape& want, const char* name) {
  if (t.dtype != want.dtype || t.dims != want.dims)
    fail(std::string(name) + " " + str(t) + " must be " + str(want));
}

// Unless the optional `addend` input i is absent, it must have dx's dtype
// and dims (a gradient op that adds x's gradient so far into dx).
inline void addend_like(const Query& q, size_t i, const TensorShape& dx) {
  const TensorShape* a = q.optional(i);
  if (a != nullptr && (a->dtype != dx.dtype || a->dims != dx.dims))
    fail("addend " + str(*a) + " must be dx's " + str(dx));
}

// numpy broadcasting of a and b, or nullopt.
inline std::optional<Dims> broadcast(const Dims& a, const Dims& b) {
  Dims out;
  if (!broadcast_shapes(a, b, out)) return std::nullopt;
  return out;
}

// A possibly negative axis (-1 = last) into [0, rank); `what` names it.
inline size_t axis(int64_t axis, size_t rank, const char* what = "axis") {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
         std::to_string(rank));
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

// Output size of a convolution or pooling window along one dim; nullopt
// when the window does not fit the padded input or an argument is out of
// range.
inline std::optional<int64_t> window_out(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                         int64_t dilation) {
  if (stride < 1 || kernel < 1 || pad < 0 || dilation < 1) return std::nullopt;
  const int64_t span = dilation * (kernel - 1) + 1;
  if (in + 2 * pad < span) return std::nullopt;
  return (in + 2 * pad - span) / stride + 1;
}

// A rule, and the table entry that names its op.
using Rule = Outputs (*)(const Query& q);
struct RuleEntry {
  const char* op;
  Rule rule;
};

}  // namespace tandem::shapes

#endif  // TANDEM_OP_SHAPE_QUERY_HPP
