// Tandem SDK — the op catalog as data: every op's operands and results,
// attributes (name, type, default, valid values), dtypes, gradient ops,
// in-place pairs and flags, one entry per op (tandem/op_catalog_entries.hpp).
//
// Derived from it, never written twice:
//   - the host's op table (slots, in-place pairs, flags, gradient ops; the
//     host adds shape and gradient rules, keyed by these names);
//   - sdk/ops.md's signature and section tables (`tandem-op-tables`);
//   - the checks every backend's kernels get before their factory runs
//     (tandem/backend_kit.hpp: operand counts, attribute types, values and
//     defaults), so a kernel file holds only its arithmetic;
//   - the conformance kit's tolerance class per op;
//   - what a feature plugin learns of a node through node_op_info (ABI 1.13):
//     its TDM_OP_* flags, including its class under mixed precision.
//
// Header-only, standard library only; C++20. The entries are constexpr
// text; ops() parses them once, on first use, and a malformed entry is a
// std::logic_error naming the op (the SDK's own tests parse every entry).
#ifndef TANDEM_OP_CATALOG_HPP
#define TANDEM_OP_CATALOG_HPP

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/graph.h"
#include "tandem/types.h"

namespace tandem::catalog {

// How mixed precision treats an op: computed in bf16 and f16, in bf16 only,
// or kept in f32. Every op declares one (unset fails the catalog's tests).
enum class Amp { unset, low, bf16, f32 };

// The conformance kit's tolerance class of an op's outputs (the table and
// its reasons: sdk/conformance/src/tolerance.cpp).
enum class Tolerance { unset, exact, elementwise, transcendental, accumulate, normalization, optimizer };

// One entry, as written in op_catalog_entries.hpp.
struct OpEntry {
  std::string_view name;
  std::string_view section;  // the file stem of its family (sdk/ops.md, "Sections")
  std::string_view inputs, outputs, attrs;
  std::string_view dtypes;   // as sdk/ops.md's table shows them
  std::string_view grad;     // the ops its gradient rule emits, space-separated
  std::string_view inplace;  // "out=in mode" pairs; mode always, reuse or (absent) on request
  uint32_t flags = 0;        // TDM_OP_* (tandem/graph.h) besides the amp class
  Amp amp = Amp::unset;
  Tolerance tolerance = Tolerance::unset;
  std::string_view summary = {};  // what it computes, in one line (model-file layers' help)
};

#include "tandem/op_catalog_entries.hpp"

struct Operand {
  std::string name;
  std::string text;                           // as written: "lse f32[B,H,T]"
  bool optional = false;                      // "bias?"
  bool variadic = false;                      // "x0...": one or more
  tdm_dtype fixed_dtype = TDM_DTYPE_INVALID;  // written in the operand ("labels s32[N]")
};

struct Attribute {
  enum class Default { literal, required, computed };
  std::string name;
  tdm_attr_type type = TDM_ATTR_INT;
  Default kind = Default::literal;
  std::string default_text;  // "0.01", "[1,1]", "none", "=kernel"
  int64_t int_default = 0;
  double float_default = 0;
  std::vector<int64_t> ints_default;
  std::vector<std::string> choices;  // a string's valid values; empty: any
  double lo = -HUGE_VAL, hi = HUGE_VAL;
  bool lo_open = false;  // ">0"
  bool hi_open = false;  // "0..<1"
  std::string constraint_text;
};

struct InplacePair {
  size_t out = 0, in = 0;
  bool always = false, reuse = false;
};

struct Op {
  const OpEntry* entry = nullptr;
  std::string name, section;
  std::vector<Operand> inputs, outputs;
  std::vector<Attribute> attrs;
  std::vector<std::string> grad_ops;
  std::vector<InplacePair> inplace;
  uint32_t flags = 0;  // the entry's flags plus TDM_OP_AMP_LOW / TDM_OP_AMP_BF16 from its amp class

  bool is(uint32_t flag) const noexcept { return (flags & flag) != 0; }
  const Attribute* attr(std::string_view n) const noexcept {
    for (const Attribute& a : attrs)
      if (a.name == n) return &a;
    return nullptr;
  }
  // The counts a node may have: required slots up to every slot (a
  // variadic operand: no upper bound).
  size_t min_inputs() const noexcept { return required(inputs); }
  size_t max_inputs() const noexcept { return bound(inputs); }
  size_t min_outputs() const noexcept { return required(outputs); }
  size_t max_outputs() const noexcept { return bound(outputs); }

 private:
  static size_t required(const std::vector<Operand>& v) noexcept {
    size_t n = 0;
    for (size_t i = 0; i < v.size(); ++i)
      if (!v[i].optional) n = i + 1;
    return n;
  }
  static size_t bound(const std::vector<Operand>& v) noexcept {
    return !v.empty() && v.back().variadic ? SIZE_MAX : v.size();
  }
};

namespace detail {

[[noreturn]] inline void malformed(std::string_view op, const std::string& what) {
  throw std::logic_error("op catalog: entry '" + std::string(op) + "': " + what);
}

inline std::string trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

// Splits at `sep` outside brackets and parentheses.
inline std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    const char c = i < s.size() ? s[i] : sep;
    if (c == '[' || c == '(') ++depth;
    if (c == ']' || c == ')') --depth;
    if (c == sep && depth == 0) {
      const std::string part = trim(s.substr(start, i - start));
      if (!part.empty()) parts.push_back(part);
      start = i + 1;
    }
  }
  return parts;
}

inline tdm_dtype dtype_named(std::string_view s) {
  constexpr std::pair<std::string_view, tdm_dtype> kNames[] = {
      {"f32", TDM_F32}, {"f64", TDM_F64}, {"f16", TDM_F16}, {"bf16", TDM_BF16},
      {"s8", TDM_S8},   {"u8", TDM_U8},   {"s32", TDM_S32}, {"s64", TDM_S64}};
  for (const auto& [name, dtype] : kNames)
    if (s == name) return dtype;
  return TDM_DTYPE_INVALID;
}

inline Operand parse_operand(std::string_view op, const std::string& text) {
  Operand o;
  o.text = text;
  std::string s = text;
  if (s.ends_with('?')) {
    o.optional = true;
    s.pop_back();
  }
  if (s.ends_with("...")) {
    o.variadic = true;
    s.resize(s.size() - 3);
  }
  size_t end = 0;
  while (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '_')) ++end;
  o.name = s.substr(0, end);
  if (o.name.empty()) malformed(op, "operand '" + text + "' has no name");
  if (end < s.size() && s[end] == ' ') {
    const size_t bracket = s.find('[', end);
    const std::string dtype =
        s.substr(end + 1, bracket == std::string::npos ? std::string::npos : bracket - end - 1);
    o.fixed_dtype = dtype_named(dtype);
    if (o.fixed_dtype == TDM_DTYPE_INVALID)
      malformed(op, "operand '" + text + "': unknown dtype '" + dtype + "'");
  }
  return o;
}

inline double number(std::string_view op, const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) malformed(op, "'" + s + "' is not a number");
  return v;
}

inline std::vector<int64_t> int_list(std::string_view op, const std::string& s) {
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') malformed(op, "'" + s + "' is not a list [a,b]");
  std::vector<int64_t> v;
  for (const std::string& item : split(std::string_view(s).substr(1, s.size() - 2), ','))
    v.push_back(static_cast<int64_t>(number(op, item)));
  return v;
}

inline void parse_constraint(std::string_view op, Attribute& a, const std::string& c) {
  a.constraint_text = c;
  if (a.type == TDM_ATTR_STRING) {
    a.choices = split(c, '/');
    return;
  }
  if (c.starts_with('>')) {
    a.lo = number(op, c.substr(1));
    a.lo_open = true;
    return;
  }
  const size_t dots = c.find("..");
  if (dots == std::string::npos) malformed(op, "attribute '" + a.name + "': constraint '" + c + "'");
  if (dots > 0) a.lo = number(op, c.substr(0, dots));
  a.hi_open = c.compare(dots + 2, 1, "<") == 0;
  const size_t hi = dots + (a.hi_open ? 3 : 2);
  if (hi < c.size()) a.hi = number(op, c.substr(hi));
}

inline void parse_default(std::string_view op, Attribute& a, const std::string& d) {
  a.default_text = d;
  if (d == "required") {
    a.kind = Attribute::Default::required;
  } else if (d.starts_with('=')) {
    a.kind = Attribute::Default::computed;
  } else if (a.type == TDM_ATTR_INT) {
    a.int_default = static_cast<int64_t>(number(op, d));
  } else if (a.type == TDM_ATTR_FLOAT) {
    a.float_default = number(op, d);
  } else if (a.type == TDM_ATTR_INTS) {
    a.ints_default = int_list(op, d);
  } else if (a.type == TDM_ATTR_FLOATS) {
    malformed(op, "attribute '" + a.name + "': a floats default is required or computed");
  }
}

inline Attribute parse_attribute(std::string_view op, const std::string& text) {
  constexpr std::pair<std::string_view, tdm_attr_type> kTypes[] = {{"int", TDM_ATTR_INT},
                                                                   {"float", TDM_ATTR_FLOAT},
                                                                   {"string", TDM_ATTR_STRING},
                                                                   {"ints", TDM_ATTR_INTS},
                                                                   {"floats", TDM_ATTR_FLOATS}};
  Attribute a;
  const size_t space = text.find(' '), open = text.find('(');
  if (space == std::string::npos || open == std::string::npos || !text.ends_with(')'))
    malformed(op, "attribute '" + text + "' is not 'name type(default)'");
  a.name = text.substr(0, space);
  const std::string type = text.substr(space + 1, open - space - 1);
  bool known = false;
  for (const auto& [n, t] : kTypes)
    if (type == n) {
      a.type = t;
      known = true;
    }
  if (!known) malformed(op, "attribute '" + a.name + "': unknown type '" + type + "'");
  const std::string inner = text.substr(open + 1, text.size() - open - 2);
  const size_t colon = inner.find(": ");
  parse_default(op, a, trim(inner.substr(0, colon)));
  if (colon != std::string::npos) parse_constraint(op, a, trim(inner.substr(colon + 2)));
  return a;
}

inline std::vector<InplacePair> parse_inplace(std::string_view op, std::string_view text) {
  std::vector<InplacePair> pairs;
  for (const std::string& item : split(text, ',')) {
    InplacePair p;
    const size_t eq = item.find('='), space = item.find(' ');
    if (eq == std::string::npos) malformed(op, "in-place pair '" + item + "' is not out=in");
    p.out = static_cast<size_t>(number(op, item.substr(0, eq)));
    p.in = static_cast<size_t>(
        number(op, item.substr(eq + 1, space == std::string::npos ? space : space - eq - 1)));
    const std::string mode = space == std::string::npos ? "" : item.substr(space + 1);
    p.always = mode == "always";
    p.reuse = mode == "reuse";
    if (!mode.empty() && !p.always && !p.reuse) malformed(op, "in-place mode '" + mode + "'");
    pairs.push_back(p);
  }
  return pairs;
}

inline Op parse(const OpEntry& e, const std::map<std::string_view, Op>& earlier) {
  Op op;
  op.entry = &e;
  op.name = e.name;
  op.section = e.section;
  for (const std::string& s : split(e.inputs, ',')) op.inputs.push_back(parse_operand(e.name, s));
  for (const std::string& s : split(e.outputs, ',')) op.outputs.push_back(parse_operand(e.name, s));
  for (const std::string& s : split(e.attrs, ',')) {
    if (!s.starts_with('@')) {
      op.attrs.push_back(parse_attribute(e.name, s));
      continue;
    }
    const auto it = earlier.find(std::string_view(s).substr(1));
    if (it == earlier.end()) malformed(e.name, "'" + s + "' names no earlier op");
    op.attrs.insert(op.attrs.end(), it->second.attrs.begin(), it->second.attrs.end());
  }
  for (const std::string& g : split(e.grad, ' ')) op.grad_ops.push_back(g);
  op.inplace = parse_inplace(e.name, e.inplace);
  op.flags = e.flags | (e.amp == Amp::low ? uint32_t{TDM_OP_AMP_LOW} : 0u) |
             (e.amp == Amp::bf16 ? uint32_t{TDM_OP_AMP_BF16} : 0u);
  return op;
}

// "> 0", "at least 1", "in [0, 1]" for a numeric constraint.
inline std::string range_text(const Attribute& a) {
  const auto num = [](double v) {
    std::string t = std::to_string(v);
    while (t.find('.') != std::string::npos && (t.back() == '0' || t.back() == '.')) t.pop_back();
    return t;
  };
  if (a.lo_open) return "> " + num(a.lo);
  if (a.hi == HUGE_VAL) return "at least " + num(a.lo);
  if (a.lo == -HUGE_VAL) return (a.hi_open ? "below " : "at most ") + num(a.hi);
  return "in [" + num(a.lo) + ", " + num(a.hi) + (a.hi_open ? ")" : "]");
}

struct Parsed {
  std::vector<Op> ops;
  std::map<std::string_view, const Op*> by_name;
};

inline const Parsed& parsed() {
  static const Parsed p = [] {
    Parsed r;
    std::map<std::string_view, Op> seen;
    for (const OpEntry& e : kEntries) {
      if (seen.count(e.name) > 0) malformed(e.name, "defined twice");
      r.ops.push_back(parse(e, seen));
      seen.emplace(e.name, r.ops.back());
    }
    for (const Op& op : r.ops) r.by_name.emplace(op.entry->name, &op);
    return r;
  }();
  return p;
}

}  // namespace detail

// Every op, in catalog order.
inline const std::vector<Op>& ops() {
  return detail::parsed().ops;
}
// nullptr for a name the catalog does not define (a plugin's own op).
inline const Op* find(std::string_view name) {
  const auto& m = detail::parsed().by_name;
  const auto it = m.find(name);
  return it == m.end() ? nullptr : it->second;
}

// Attribute `name` of catalog op `op` where code reads its literal default;
// std::logic_error when the catalog gives none (a bug in the caller).
inline const Attribute& literal_default(std::string_view op, std::string_view name) {
  const Op* entry = find(op);
  const Attribute* a = entry != nullptr ? entry->attr(name) : nullptr;
  if (a == nullptr || a->kind != Attribute::Default::literal)
    throw std::logic_error("op '" + std::string(op) + "': the catalog has no default for '" +
                           std::string(name) + "'");
  return *a;
}

// Bit i set: operand i is f32 whatever the data's dtype (slots past 63 never).
inline uint64_t fixed_f32_mask(const std::vector<Operand>& slots) noexcept {
  uint64_t mask = 0;
  for (size_t i = 0; i < slots.size() && i < 64; ++i)
    if (slots[i].fixed_dtype == TDM_F32) mask |= uint64_t{1} << i;
  return mask;
}

// Why `a` breaks `spec` (its type, a string's choices, a number's range,
// a non-finite float), or "" when it does not.
inline std::string attribute_error(const Attribute& spec, const tdm_attr& a) {
  const std::string where = "attribute '" + spec.name + "'";
  const bool type_ok = a.type == spec.type || (spec.type == TDM_ATTR_FLOAT && a.type == TDM_ATTR_INT) ||
                       (spec.type == TDM_ATTR_INTS && a.type == TDM_ATTR_INT) ||
                       (spec.type == TDM_ATTR_FLOATS && (a.type == TDM_ATTR_FLOAT || a.type == TDM_ATTR_INT));
  constexpr const char* kTypeNames[] = {"?",        "an int",         "a float",
                                        "a string", "a list of ints", "a list of floats"};
  if (!type_ok) return where + " must be " + kTypeNames[spec.type];
  if (a.type == TDM_ATTR_STRING) {
    const std::string s = a.s != nullptr ? a.s : "";
    bool ok = spec.choices.empty();
    for (const std::string& c : spec.choices) ok = ok || c == s;
    return ok ? "" : where + " must be " + spec.constraint_text + ", got \"" + s + "\"";
  }
  std::vector<double> values;
  if (a.type == TDM_ATTR_INT) values.push_back(static_cast<double>(a.i));
  if (a.type == TDM_ATTR_FLOAT) values.push_back(a.f);
  if (a.type == TDM_ATTR_INTS && a.ints != nullptr) values.assign(a.ints, a.ints + a.count);
  if (a.type == TDM_ATTR_FLOATS && a.floats != nullptr) values.assign(a.floats, a.floats + a.count);
  for (double v : values) {
    if (!std::isfinite(v)) return where + " must be finite, got " + std::to_string(v);
    const bool low = spec.lo_open ? v <= spec.lo : v < spec.lo;
    const bool high = spec.hi_open ? v >= spec.hi : v > spec.hi;
    if (low || high) {
      std::string got = std::to_string(v);
      if (a.type == TDM_ATTR_INT || a.type == TDM_ATTR_INTS) got = std::to_string(static_cast<int64_t>(v));
      return where + " must be " + detail::range_text(spec) + ", got " + got;
    }
  }
  return "";
}

}  // namespace tandem::catalog

#endif  // TANDEM_OP_CATALOG_HPP
