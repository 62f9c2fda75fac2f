// Tandem SDK — the backend kit, part of the header-only C++ helper: what
// every backend's kernel_prepare needs besides its arithmetic.
//
//   Check           validation of an op description at prepare time, with
//                   one vocabulary for every backend and messages that say
//                   which backend, op and graph node ("mybackend: op 'linear'
//                   (node 'fc1'): input 1: expected shape [4,3], got [3,4]");
//   KernelRegistry  catalog name -> kernel factory, whose lookup makes the
//                   checks every backend owes the host before any factory
//                   runs: an op it does not know and an op version newer
//                   than it implements are TDM_UNSUPPORTED (a normal answer:
//                   the host places the op elsewhere); a negative dimension,
//                   and for a catalog op (tandem/op_catalog.hpp) a wrong
//                   operand count, an attribute of the wrong type or
//                   outside its valid values, or operands and outputs that
//                   break the op's shape rule (tandem/op_shapes.hpp: dims
//                   and dtypes), is TDM_INVALID_ARGUMENT;
//   SectionList     the registration functions of the backend's op files,
//                   each enlisted by its own file while the library loads;
//   FnKernel        a kernel that is a closure over what prepare validated.
//
// The f16/bf16 conversions are in tandem/half.hpp, shape arithmetic
// (numel, strides, broadcasting) in tandem/shape_util.hpp.
//
// For a third-party backend, one op is one factory, best in a file named
// after the op's section of sdk/ops.md ("## Sections and the files that
// implement them"), so an op is found in any backend in one hop:
//
//   // ops/elementwise.cpp, everything in an unnamed namespace
//   std::unique_ptr<tandem::Kernel> add(const tandem::OpView& op, size_t&) {
//     tandem::Check c(op, "mybackend");
//     c.primary_dtype(0, {TDM_F32});  // else UNSUPPORTED
//     // The registry has checked b and y against add's shape rule; what is
//     // left is what this backend cannot do.
//     if (c.in(1).dims != c.in(0).dims) c.unsupported("broadcasting is not implemented");
//     const int64_t n = c.in(0).numel();
//     return tandem::make_fn_kernel("mybackend:add", [n](void* const* in, void* const* out) {
//       for (int64_t i = 0; i < n; ++i)
//         static_cast<float*>(out[0])[i] = static_cast<const float*>(in[0])[i] +
//                                          static_cast<const float*>(in[1])[i];
//     });
//   }
//   [[maybe_unused]] const bool registered =
//       sections().enlist([](tandem::KernelRegistry<>& r) { r.add("add", add); });
//
//   // device.cpp (sections() declared in a header every op file includes)
//   tandem::SectionList<tandem::KernelRegistry<>>& sections() {
//     static tandem::SectionList<tandem::KernelRegistry<>> list;
//     return list;
//   }
//   std::unique_ptr<tandem::Kernel> MyDevice::prepare(const tandem::OpView& op, size_t& ws) {
//     static const tandem::KernelRegistry<> registry = sections().build("mybackend");
//     return registry.prepare(op, ws);
//   }
//
// Every failure is an exception (tandem::Error, tandem::Unsupported) that
// tandem.hpp's adapter turns into the returned status and the host message:
// nothing here crosses the C boundary. Header-only, standard library only.
#ifndef TANDEM_BACKEND_KIT_HPP
#define TANDEM_BACKEND_KIT_HPP

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tandem/op_catalog.hpp"
#include "tandem/op_shapes.hpp"
#include "tandem/shape_util.hpp"
#include "tandem/tandem.hpp"

namespace tandem {

using DtypeSet = std::vector<tdm_dtype>;

// ---------------------------------------------------------------------------
// Check: prepare-time validation of one op description
// ---------------------------------------------------------------------------
//
// Two kinds of refusal: fail() for a description that breaks the catalog (a
// wrong count, dtype or shape: TDM_INVALID_ARGUMENT, the graph is wrong) and
// unsupported() for one that is right but that this backend does not
// implement (TDM_UNSUPPORTED). The "primary" dtype of an op selects the
// implementation, so a dtype outside the set a backend implements is
// unsupported; every other tensor's dtype follows from the signature, so a
// mismatch there is a failure. An optional tensor is absent when its slot is
// missing or its dtype is TDM_DTYPE_INVALID. The Check refers to the
// OpView: use it during prepare only (copy where() for launch-time errors).
class Check {
 public:
  // `backend` names the backend in every message; it must outlive the Check
  // (a string literal, or the registry's name).
  Check(const OpView& op, std::string_view backend) : op_(op), backend_(backend) {}

  const OpView& op() const noexcept { return op_; }
  std::string_view backend() const noexcept { return backend_; }
  // "op 'linear' (node 'fc1')"; the node only when the host gave one.
  std::string where() const {
    std::string s = "op '" + op_.op() + "'";
    const std::string node = op_.node_name();
    if (!node.empty()) s += " (node '" + node + "')";
    return s;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(TDM_INVALID_ARGUMENT, prefix() + what);
  }
  [[noreturn]] void unsupported(const std::string& why) const { throw Unsupported(prefix() + why); }

  // Input and output counts within [min, max] (optional slots included):
  // for an op outside the catalog (the registry checks a catalog op's).
  void counts(size_t min_in, size_t max_in, size_t min_out, size_t max_out) const {
    const size_t ni = op_.inputs().size(), no = op_.outputs().size();
    if (ni < min_in || ni > max_in)
      fail("expected " + range(min_in, max_in) + " inputs, got " + std::to_string(ni));
    if (no < min_out || no > max_out)
      fail("expected " + range(min_out, max_out) + " outputs, got " + std::to_string(no));
  }
  bool has_input(size_t i) const noexcept {
    return i < op_.inputs().size() && op_.inputs()[i].dtype != TDM_DTYPE_INVALID;
  }
  bool has_output(size_t j) const noexcept {
    return j < op_.outputs().size() && op_.outputs()[j].dtype != TDM_DTYPE_INVALID;
  }
  const TensorShape& in(size_t i) const { return op_.inputs().at(i); }
  const TensorShape& out(size_t j) const { return op_.outputs().at(j); }

  // The dtype of input i, which selects the implementation: required, and
  // one of `implemented`, else unsupported. Returns it.
  tdm_dtype primary_dtype(size_t i, const DtypeSet& implemented) const {
    require(true, i);
    if (!contains(implemented, in(i).dtype))
      unsupported("dtype " + std::string(dtype_name(in(i).dtype)) + " of input " + std::to_string(i) +
                  " is not implemented (supported: " + set_str(implemented) + ")");
    return in(i).dtype;
  }
  // The same for an output (ops whose output dtype selects: cast, fill).
  tdm_dtype primary_output_dtype(size_t j, const DtypeSet& implemented) const {
    require(false, j);
    if (!contains(implemented, out(j).dtype))
      unsupported("dtype " + std::string(dtype_name(out(j).dtype)) + " of output " + std::to_string(j) +
                  " is not implemented (supported: " + set_str(implemented) + ")");
    return out(j).dtype;
  }
  // The dtype output j of a product (linear, linear_grad_weight) must have
  // over operands of dtype `operands`: f32 for bf16/f16 operands when the
  // node declares it f32 (ops.md "Wide outputs", ABI 1.11), else
  // `operands`. A backend that does not compute wide outputs passes
  // wide_implemented = false and declines them with a reason.
  tdm_dtype product_output_dtype(size_t j, tdm_dtype operands, bool wide_implemented = true) const {
    require(false, j);
    const bool wide = (operands == TDM_BF16 || operands == TDM_F16) && out(j).dtype == TDM_F32;
    if (wide && !wide_implemented)
      unsupported(std::string("f32 outputs from ") + dtype_name(operands) + " operands are not implemented");
    return wide ? TDM_F32 : operands;
  }
  // A tensor whose dtype the signature fixes: required, one of `allowed`.
  void input_dtype(size_t i, const DtypeSet& allowed) const {
    require(true, i);
    if (!contains(allowed, in(i).dtype))
      fail(name(true, i) + ": expected dtype " + set_str(allowed) + ", got " + dtype_name(in(i).dtype));
  }
  void output_dtype(size_t j, const DtypeSet& allowed) const {
    require(false, j);
    if (!contains(allowed, out(j).dtype))
      fail(name(false, j) + ": expected dtype " + set_str(allowed) + ", got " + dtype_name(out(j).dtype));
  }
  void input_shape(size_t i, const Dims& expected) const {
    require(true, i);
    if (in(i).dims != expected)
      fail(name(true, i) + ": expected shape " + dims_str(expected) + ", got " + dims_str(in(i).dims));
  }
  // Dtype and shape at once.
  void input(size_t i, tdm_dtype dtype, const Dims& expected) const {
    input_dtype(i, {dtype});
    input_shape(i, expected);
  }
  void output(size_t j, tdm_dtype dtype, const Dims& expected) const {
    require(false, j);
    if (out(j).dtype != dtype || out(j).dims != expected)
      fail(name(false, j) + ": expected " + TensorShape(dtype, expected).str() + ", got " + out(j).str());
  }
  void input_rank(size_t i, size_t rank) const {
    require(true, i);
    if (in(i).rank() != rank)
      fail(name(true, i) + ": expected rank " + std::to_string(rank) + ", got " + in(i).str());
  }
  void input_rank_at_least(size_t i, size_t rank) const {
    require(true, i);
    if (in(i).rank() < rank)
      fail(name(true, i) + ": expected rank >= " + std::to_string(rank) + ", got " + in(i).str());
  }

  // Attributes with the catalog's defaults (tandem/op_catalog.hpp). The
  // registry has checked each one the node carries against the catalog
  // (type, valid values, finiteness) before the factory runs; asking for an
  // attribute the catalog gives no literal default is a bug in the backend.
  int64_t int_attr(const char* n) const { return op_.int_attr(n, spec(n).int_default); }
  double float_attr(const char* n) const { return op_.float_attr(n, spec(n).float_default); }
  std::string string_attr(const char* n) const { return op_.string_attr(n, spec(n).default_text); }
  std::vector<int64_t> ints_attr(const char* n) const { return op_.ints_attr(n, spec(n).ints_default); }

  // Attributes with the backend's own fallback: for an op outside the
  // catalog, and for defaults the op computes (a pooling stride that
  // defaults to the kernel).
  int64_t int_attr(const char* n, int64_t fallback) const { return op_.int_attr(n, fallback); }
  double float_attr(const char* n, double fallback) const { return op_.float_attr(n, fallback); }
  std::string string_attr(const char* n, const std::string& fallback) const {
    return op_.string_attr(n, fallback);
  }
  std::vector<int64_t> ints_attr(const char* n, std::vector<int64_t> fallback) const {
    return op_.ints_attr(n, std::move(fallback));
  }
  // An `ints` attribute of two entries (kernel, stride, padding); a single
  // value stands for both.
  std::vector<int64_t> pair_attr(const char* n, std::vector<int64_t> fallback) const {
    std::vector<int64_t> v = op_.ints_attr(n, std::move(fallback));
    if (v.size() == 1) v.push_back(v[0]);
    if (v.size() != 2)
      fail("attribute '" + std::string(n) + "' must have 2 entries, got " + std::to_string(v.size()));
    return v;
  }
  // A required list of numbers (scales): FLOATS as given, one FLOAT or INT
  // as a list of one.
  std::vector<double> floats_attr(const char* n) const {
    const tdm_attr* a = op_.attr(n);
    if (a == nullptr) fail("attribute '" + std::string(n) + "' is required");
    if (a->type == TDM_ATTR_FLOAT) return {a->f};
    if (a->type == TDM_ATTR_INT) return {static_cast<double>(a->i)};
    if (a->type != TDM_ATTR_FLOATS || (a->floats == nullptr && a->count != 0))
      fail("attribute '" + std::string(n) + "' must be a float or a list of floats");
    return std::vector<double>(a->floats, a->floats + a->count);
  }
  // A possibly negative axis (-1 = last) normalised into [0, rank); `what`
  // names it in the message.
  size_t axis(int64_t axis, size_t rank, const char* what = "axis") const {
    const int64_t r = static_cast<int64_t>(rank);
    if (axis < -r || axis >= r)
      fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
           std::to_string(rank));
    return static_cast<size_t>(axis < 0 ? axis + r : axis);
  }

 private:
  std::string prefix() const {
    std::string s(backend_);
    s += ": ";
    s += where();
    s += ": ";
    return s;
  }
  // The catalog's spec of attribute n of this op, which must have a literal default.
  const catalog::Attribute& spec(const char* n) const { return catalog::literal_default(op_.op(), n); }
  static std::string name(bool input, size_t index) {
    return (input ? "input " : "output ") + std::to_string(index);
  }
  void require(bool input, size_t index) const {
    if (!(input ? has_input(index) : has_output(index))) fail(name(input, index) + " is required");
  }
  static std::string range(size_t lo, size_t hi) {
    return lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
  }
  static bool contains(const DtypeSet& set, tdm_dtype d) noexcept {
    for (tdm_dtype x : set)
      if (x == d) return true;
    return false;
  }
  static std::string set_str(const DtypeSet& set) {
    std::string s;
    for (size_t i = 0; i < set.size(); ++i) {
      if (i > 0) s += '/';
      s += dtype_name(set[i]);
    }
    return s;
  }

  const OpView& op_;
  std::string_view backend_;
};

// ---------------------------------------------------------------------------
// KernelRegistry: catalog name -> factory, with the checks of every prepare
// ---------------------------------------------------------------------------
//
// `Factory` is whatever a backend's prepare calls: by default a function
// (op, workspace bytes) -> kernel; a backend whose factories need more (its
// device) or whose entries carry more (an answer for kernel_layouts) names
// its own type and calls resolve(). Build it once (a function-local static),
// then look up from any thread: lookups never modify it.
using KernelFactory = std::unique_ptr<Kernel> (*)(const OpView& op, size_t& workspace_bytes);

template <class Factory = KernelFactory>
class KernelRegistry {
 public:
  // `catalog_version`: the newest op version (tdm_op_desc.op_version) the
  // backend implements; the catalog is at version 1.
  explicit KernelRegistry(std::string backend, uint32_t catalog_version = 1)
      : backend_(std::move(backend)), catalog_version_(catalog_version) {}

  // One entry per op. Registering a name twice is a bug in the backend.
  void add(const std::string& op, Factory factory) {
    if (!factories_.emplace(op, std::move(factory)).second)
      throw std::logic_error(backend_ + ": op '" + op + "' is registered twice");
  }

  const std::string& backend() const noexcept { return backend_; }
  // The entry of `op`, or nullptr; no checks.
  const Factory* find(const std::string& op) const noexcept {
    const auto it = factories_.find(op);
    return it == factories_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> v;
    for (const auto& entry : factories_) v.push_back(entry.first);
    return v;
  }

  // The entry for `op` after the checks every prepare owes the host.
  const Factory& resolve(const OpView& op) const {
    const Factory* factory = find(op.op());
    if (factory == nullptr) throw Unsupported(backend_ + ": op '" + op.op() + "' is not implemented");
    if (op.version() > catalog_version_)
      throw Unsupported(backend_ + ": op '" + op.op() + "' version " + std::to_string(op.version()) +
                        " is newer than the catalog version " + std::to_string(catalog_version_) +
                        " this backend implements");
    // Checked once here, so no factory has to fear a negative dimension,
    // a wrong operand count or an attribute outside the catalog's values.
    check_dims(op, op.inputs(), "input");
    check_dims(op, op.outputs(), "output");
    if (const catalog::Op* entry = catalog::find(op.op())) check_against(*entry, op);
    return *factory;
  }

  // resolve() and call the factory as factory(context..., op, workspace);
  // workspace starts at 0.
  template <class... Context>
  std::unique_ptr<Kernel> prepare(const OpView& op, size_t& workspace, Context&&... context) const {
    workspace = 0;
    return resolve(op)(std::forward<Context>(context)..., op, workspace);
  }

 private:
  void check_dims(const OpView& op, const std::vector<TensorShape>& tensors, const char* kind) const {
    for (size_t i = 0; i < tensors.size(); ++i)
      for (int64_t d : tensors[i].dims)
        if (d < 0)
          Check(op, backend_)
              .fail(std::string(kind) + " " + std::to_string(i) + " has a negative dimension " +
                    tensors[i].str());
  }

  // The catalog's operand counts, required attributes, and each present
  // attribute's type and valid values.
  void check_against(const catalog::Op& entry, const OpView& op) const {
    const Check c(op, backend_);
    const auto count = [&](size_t n, size_t lo, size_t hi, const char* kind) {
      if (n >= lo && n <= hi) return;
      const std::string want = lo == hi         ? std::to_string(lo)
                               : hi == SIZE_MAX ? std::to_string(lo) + " or more"
                                                : std::to_string(lo) + ".." + std::to_string(hi);
      c.fail("expected " + want + " " + kind + ", got " + std::to_string(n));
    };
    count(op.inputs().size(), entry.min_inputs(), entry.max_inputs(), "inputs");
    count(op.outputs().size(), entry.min_outputs(), entry.max_outputs(), "outputs");
    for (const catalog::Attribute& spec : entry.attrs) {
      const tdm_attr* a = op.attr(spec.name.c_str());
      if (a == nullptr) {
        if (spec.kind == catalog::Attribute::Default::required)
          c.fail("attribute '" + spec.name + "' is required");
        continue;
      }
      if (const std::string why = catalog::attribute_error(spec, *a); !why.empty()) c.fail(why);
    }
    // The op's shape rule (tandem/op_shapes.hpp), the host's too: the
    // operands agree with each other and the outputs are what they give.
    std::vector<const TensorShape*> inputs;
    for (const TensorShape& t : op.inputs()) inputs.push_back(t.dtype == TDM_DTYPE_INVALID ? nullptr : &t);
    try {
      const shapes::Outputs want =
          shapes::infer(shapes::Query(entry, std::move(inputs), op.attrs(), op.n_attrs(), op.outputs()));
      if (const std::string why = shapes::outputs_error(want, op.outputs()); !why.empty()) c.fail(why);
    } catch (const shapes::Invalid& e) {
      c.fail(e.what());
    }
  }

  std::string backend_;
  uint32_t catalog_version_;
  std::map<std::string, Factory> factories_;
};

// ---------------------------------------------------------------------------
// SectionList: section files that register themselves
// ---------------------------------------------------------------------------
//
// So that adding a family of ops is adding one file, each ops/<stem>.cpp
// enlists its registration function while the library loads:
//
//   namespace {
//   ...
//   [[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
//     r.add("dropout", dropout);
//     r.add("dropout_grad", dropout_grad);
//   });
//   }
//
// where sections() is the backend's one function-local static list, and the
// registry is built from it on first use (inside prepare, where an exception
// becomes a status): only a pointer is stored at load time, nothing throws
// there. The section files must be linked into the plugin as objects (an
// archive would drop a file nothing refers to).
template <class Registry>
class SectionList {
 public:
  using Section = void (*)(Registry& registry);

  bool enlist(Section section) noexcept {
    try {
      sections_.push_back(section);
      return true;
    } catch (...) {
      complete_ = false;
      return false;
    }
  }
  // A registry with every enlisted section's entries.
  Registry build(std::string backend, uint32_t catalog_version = 1) const {
    if (!complete_)
      throw Error(TDM_OUT_OF_MEMORY, backend + ": an op section could not register while loading");
    Registry r(std::move(backend), catalog_version);
    for (Section section : sections_) section(r);
    return r;
  }

 private:
  std::vector<Section> sections_;
  bool complete_ = true;
};

// ---------------------------------------------------------------------------
// FnKernel: a closure over what prepare validated
// ---------------------------------------------------------------------------
//
// `fn` is called as fn(inputs, outputs, workspace), or fn(inputs, outputs)
// when it takes two arguments; it runs to completion inside launch (a
// synchronous, host-addressable device). describe() returns `description`.
template <class Fn>
class FnKernel final : public Kernel {
 public:
  FnKernel(std::string description, Fn fn) : description_(std::move(description)), fn_(std::move(fn)) {}
  void launch(Stream&, void* const* in, void* const* out, void* workspace) override {
    if constexpr (std::is_invocable_v<Fn&, void* const*, void* const*, void*>)
      fn_(in, out, workspace);
    else
      fn_(in, out);
  }
  const char* describe() const noexcept override { return description_.c_str(); }

 private:
  std::string description_;
  Fn fn_;
};

template <class Fn>
std::unique_ptr<Kernel> make_fn_kernel(std::string description, Fn fn) {
  return std::make_unique<FnKernel<Fn>>(std::move(description), std::move(fn));
}

}  // namespace tandem

#endif  // TANDEM_BACKEND_KIT_HPP
