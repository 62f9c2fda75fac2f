// The host's one table of catalog ops: for each op what the host needs to
// know about it — its input and output slots, which outputs overwrite which
// inputs, what kind of op it is (flags) and the gradient ops its rule emits,
// all from the SDK's catalog (tandem/op_catalog.hpp), its shape rule from
// the SDK's rules (tandem/op_shapes.hpp, which every backend's kit runs
// too), plus the host's own part: its gradient rule, its cost.
// Lowering, autodiff, the planner, placement, the executor and the trainer
// ask this table; none of them compares op names itself.
//
// One file per catalog section (host/ops/<stem>.cpp, the stems of sdk/ops.md
// "Sections and the files that implement them") gives the host's part, and
// host_run.cpp the ops the host runs itself (comm.* collectives, zero.*,
// tandem.copy), which are not catalog ops. A catalog op without the host's
// part, or a host entry the catalog lacks, stops the table from building
// (CONTRIBUTING.md lists every file a new op touches).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graph/graph.hpp"
#include "tandem/graph.h"
#include "util/result.hpp"

namespace tandem::host::ops {

class GradContext;

// What kind of op it is: the catalog's TDM_OP_* flags (tandem/graph.h),
// which feature plugins read too (node_op_info).
enum Flag : uint32_t {
  kOptimizer = TDM_OP_OPTIMIZER,      // updates parameters and optimizer state (sgd_update, adamw_update)
  kElementwise = TDM_OP_ELEMENTWISE,  // y[i] depends on x[i] alone: a slice of x gives that slice of y
  kHostRun = TDM_OP_HOST_RUN,  // the host runs it, not a backend kernel (no prepare, no cost, plain layouts)
  kCollective = TDM_OP_COLLECTIVE,  // a host-run op that communicates between ranks (needs exec::Collectives)
  kGradient = TDM_OP_GRADIENT,      // a backward op of another op
  kInferenceOnly =
      TDM_OP_INFERENCE_ONLY,  // has no gradient by its nature (INT8, quantize, batch_norm_inference)
  kView = TDM_OP_VIEW,        // output 0 is input 0's bytes read with another shape (reshape)
};

// What a host-run op does (kHostRun), and their names (host_run.cpp).
// The first four exchange between the ranks of a tensor-parallel group; the
// zero.* ops between the data-parallel peers that share training state (ZeRO,
// lowering/optimizer.hpp, lowering/zero_overlap.hpp).
enum class HostKind {
  None,
  AllReduce,
  CopyToParallel,
  AllGather,
  Chunk,
  DeviceCopy,
  ZeroShard,
  ZeroReduceScatter,
  ZeroGather,
  ZeroAllReduce,
  ZeroAllGather,
  ZeroWait
};
inline constexpr const char* kAllReduce = "comm.all_reduce";
inline constexpr const char* kCopyToParallel = "comm.copy_to_parallel";
inline constexpr const char* kAllGather = "comm.all_gather";
inline constexpr const char* kChunk = "comm.chunk";
inline constexpr const char* kDeviceCopy = "tandem.copy";
inline constexpr const char* kZeroShard = "zero.shard";
inline constexpr const char* kZeroReduceScatter = "zero.reduce_scatter";
inline constexpr const char* kZeroGather = "zero.gather";
inline constexpr const char* kZeroAllReduce = "zero.all_reduce";
inline constexpr const char* kZeroAllGather = "zero.all_gather";
inline constexpr const char* kZeroWait = "zero.wait";
// Whether a host-run op exchanges with the data-parallel peers (the zero.*
// ops) rather than with the tensor-parallel group.
inline bool data_parallel(HostKind kind) {
  return kind == HostKind::ZeroShard || kind == HostKind::ZeroReduceScatter || kind == HostKind::ZeroGather ||
         kind == HostKind::ZeroAllReduce || kind == HostKind::ZeroAllGather || kind == HostKind::ZeroWait;
}

// One input or output, in catalog order.
struct Slot {
  std::string_view name;
  bool optional = false;  // keeps its slot when absent (kNoValue)
};

// Output `out` may be bound to input `in`'s buffer (the catalog's
// "in-place allowed"); the host binds these always (`always`: the op's point
// is to update that tensor, an optimizer's parameter) or only when a pass
// asks for it with the annotation "tandem.inplace" = "out:in,...". `reuse`:
// besides, the memory plan puts the output in the input's bytes whenever
// the input is a transient value read last by this node (a residual sum
// into the dead branch, a gradient sum into the dead partial sum): one
// buffer less to write-allocate, never a write into a persistent tensor.
struct InplacePair {
  size_t out = 0, in = 0;
  bool always = false;
  bool reuse = false;
};

// The arguments of a shape rule.
struct ShapeQuery {
  std::vector<std::optional<TensorType>> inputs;  // nullopt: an absent optional input
  const std::vector<Attr>* attrs = nullptr;
  // The outputs the caller declared, for ops whose catalog takes a shape or
  // dtype from the output descriptor (reshape, cast, fill, quantize); empty
  // when the caller has none.
  std::span<const TensorType> declared;
};
using ShapeFn = Result<std::vector<TensorType>> (*)(const ShapeQuery& q);
using GradFn = Result<void> (*)(GradContext& g);
// Multiply-adds x 2 of a node, for GFLOP/s figures (`tandem bench`); null:
// not counted.
using FlopsFn = double (*)(const Graph& g, const Node& n);
// A matrix product's M x N x K (2·M·N·K is its FLOP count; M counts every
// batch element's rows), for the benchmark's per-shape figures.
struct ProductDims {
  int64_t m = 0, n = 0, k = 0;
};
using ProductFn = ProductDims (*)(const Graph& g, const Node& n);
// The FlopsFn of a product op: 2·M·N·K of its ProductFn.
template <ProductFn product>
double flops_of_product(const Graph& g, const Node& n) {
  const ProductDims d = product(g, n);
  return 2.0 * static_cast<double>(d.m) * static_cast<double>(d.n) * static_cast<double>(d.k);
}

// Fields marked "catalog" come from the SDK's catalog for a catalog op; a
// family file sets only the others (designated initialisers).
struct OpInfo {
  std::string_view name;
  std::string_view section;           // catalog: the file stem of its section ("linear")
  std::vector<Slot> inputs, outputs;  // catalog
  std::vector<InplacePair> inplace;   // catalog
  uint32_t flags = 0;                 // catalog
  ShapeFn shape = nullptr;            // host-run ops; a catalog op's rule is the SDK's (tandem/op_shapes.hpp)
  GradFn grad = nullptr;
  std::vector<std::string_view> grad_ops;  // catalog: every op `grad` emits besides add/reduce_sum/reshape
  std::string_view no_grad;                // why there is no gradient rule (grad == nullptr)
  int gradient_input = -1;                 // optimizers: the input that is the parameter's gradient
  HostKind host = HostKind::None;
  FlopsFn flops = nullptr;
  ProductFn product = nullptr;  // the matrix-product ops: linear and its gradients, matmul

  bool is(Flag f) const { return (flags & f) != 0; }
};

// The whole table, in catalog order.
std::span<const OpInfo> op_table();
// nullptr for an op the host does not know (a plugin's own op).
const OpInfo* find(std::string_view op);
// Whether `op` is known and has the flag.
bool is(std::string_view op, Flag flag);
// What the host runs for `op` itself (HostKind::None: a kernel, or unknown).
HostKind host_kind(std::string_view op);

// The output -> input pairs the host binds in place for `node`: the
// catalog's `always` pairs whose slots are present, and the pairs a pass
// asked for ("tandem.inplace") that the op's catalog allows.
std::vector<std::pair<size_t, size_t>> inplace_pairs(const Node& node);
// A pass's "tandem.inplace" request `text` for `node`, checked before it is
// recorded: every item "out:in" with both slots present and, for a catalog
// op, a pair the catalog allows (sdk/ABI.md rule 31); an error names the
// node, the item and what is allowed, instead of a binding quietly ignored
// (and a state quietly never updated).
Result<void> check_inplace_request(const Node& node, const std::string& text);
// The catalog's `reuse` pairs of `node` whose slots are present: the memory
// plan's own choice, only into a dead transient input (exec/planner.hpp).
std::vector<std::pair<size_t, size_t>> reuse_pairs(const Node& node);

// An error when `attrs` break what the catalog says of `op`'s attributes
// (a required one missing, a wrong type, a value outside its valid values,
// a non-finite float); nothing for an op outside the catalog. infer() runs
// it, so every node the host builds or a pass inserts reaches a backend with
// attributes the catalog allows, whatever kit the backend uses.
Result<void> check_attrs(std::string_view op, const std::vector<Attr>& attrs);

// The outputs `op` has for these inputs and attributes, or an error saying
// what is wrong. Unknown ops and ops without a shape rule: the declared
// outputs, unchecked.
Result<std::vector<TensorType>> infer(std::string_view op, const ShapeQuery& q);
// The same for a node whose inputs are values of `g`.
Result<std::vector<TensorType>> infer(const Graph& g, std::string_view op, const std::vector<ValueId>& inputs,
                                      const std::vector<Attr>& attrs, std::span<const TensorType> declared);
// An error when `declared` differs from what the shape rule gives.
Result<void> check_outputs(const Graph& g, std::string_view op, const std::vector<ValueId>& inputs,
                           const std::vector<Attr>& attrs, std::span<const TensorType> declared);

// Node `n`'s attribute with the catalog's default for its op (a bug, a
// std::logic_error, when the catalog gives the op no literal default for it).
int64_t int_attr(const Node& n, std::string_view name);
double float_attr(const Node& n, std::string_view name);
std::string string_attr(const Node& n, std::string_view name);

// Attributes with a default of the caller's.
const AttrValue* find_attr(const std::vector<Attr>& attrs, std::string_view name);
int64_t int_attr(const std::vector<Attr>& attrs, std::string_view name, int64_t fallback);
double float_attr(const std::vector<Attr>& attrs, std::string_view name, double fallback);
std::string string_attr(const std::vector<Attr>& attrs, std::string_view name, const std::string& fallback);
std::vector<int64_t> ints_attr(const std::vector<Attr>& attrs, std::string_view name,
                               std::vector<int64_t> fallback);

}  // namespace tandem::host::ops
