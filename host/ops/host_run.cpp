// Ops the host runs itself; not catalog ops, never prepared by a backend.
//
// Tensor parallelism (Megatron-LM) exchanges activations between the ranks
// that hold slices of a layer (exec/collectives.hpp runs them):
//   comm.all_reduce        y = sum over ranks of x            grad: identity
//   comm.copy_to_parallel  y = x                              grad: comm.all_reduce
//   comm.all_gather        y[r] = x of rank r; y = [world, ...x]   grad: comm.chunk
//   comm.chunk             y = x[rank]; x = [world, ...y]     grad: comm.all_gather
// ZeRO (lowering/optimizer.hpp) shares the optimizer's work between the
// data-parallel peers: each holds one shard of s = ceil(n / world) elements
// of every parameter's n, rank r the elements [r*s, r*s + s), the last
// shards padded with zeros (these four run in the optimizer phase, or
// average a gradient: no gradients of their own):
//   zero.shard           y = x.flat[rank*s : rank*s+s]
//   zero.reduce_scatter  y = (mean over ranks of x).flat[rank*s : rank*s+s]
//   zero.gather          x.flat = the ranks' shards y, concatenated (x in place)
//   zero.all_reduce      y = sum over ranks of x
// and with stage 3, where the parameters are shards too, a layer's forward
// and backward read the whole parameter gathered just before them:
//   zero.all_gather      y = the ranks' shards x, concatenated   grad: zero.reduce_scatter
// The exchanges of backward and forward (zero.reduce_scatter, zero.all_gather)
// run while later nodes compute when a wait follows them
// (lowering/zero_overlap.hpp):
//   zero.wait            y = x, once the exchange that makes x has ended; `keep`
//                        (the exchange's input) lives until then
// Placement (place/placement.hpp) moves a value between devices:
//   tandem.copy            y = x on another device            (inserted after autodiff)
#include <algorithm>

#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs same_shape(const ShapeQuery& q) {
  return same_as(q, 0, "x");
}

Outputs gather_shape(const ShapeQuery& q) {  // the world size is the caller's
  auto x = input(q, 0, "x");
  auto y = declared(q, 0, "number of ranks");
  if (!x) return x.error();
  if (!y) return y.error();
  if (y->dims.size() != x->dims.size() + 1 ||
      !std::equal(x->dims.begin(), x->dims.end(), y->dims.begin() + 1))
    return bad("y " + str(*y) + " must be [world, ...x] for x " + str(*x));
  return std::vector<TensorType>{{x->dtype, y->dims}};
}

Outputs chunk_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  if (!x) return x.error();
  if (x->dims.empty()) return bad("x must be [world, ...]");
  return std::vector<TensorType>{{x->dtype, Dims(x->dims.begin() + 1, x->dims.end())}};
}

// The shard's size is the caller's: the world size is not the graph's.
Outputs shard_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  auto y = declared(q, 0, "shard size");
  if (!x) return x.error();
  if (!y) return y.error();
  const int64_t n = numel(x->dims);
  if (y->dims.size() != 1 || y->dims[0] < 1 || y->dims[0] > std::max<int64_t>(n, 1))
    return bad("y " + str(*y) + " must be one shard [s] of x " + str(*x) + " (1 <= s <= its elements)");
  return std::vector<TensorType>{{x->dtype, y->dims}};
}

Outputs gather_shards_shape(const ShapeQuery& q) {
  auto shard = input(q, 0, "shard");
  auto x = input(q, 1, "x");
  if (!shard) return shard.error();
  if (!x) return x.error();
  if (shard->dims.size() != 1 || shard->dtype != x->dtype)
    return bad("shard " + str(*shard) + " must be [s] of x's dtype (x " + str(*x) + ")");
  return std::vector<TensorType>{*x};
}

// The whole is the caller's: the world size is not the graph's.
Outputs all_gather_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  auto y = declared(q, 0, "whole shape");
  if (!x) return x.error();
  if (!y) return y.error();
  if (x->dims.size() != 1 || x->dtype != y->dtype || numel(y->dims) < x->dims[0])
    return bad("x " + str(*x) + " must be one shard [s] of y " + str(*y) + ", of its dtype");
  return std::vector<TensorType>{*y};
}

Result<void> all_gather_shards_grad(GradContext& g) {
  return g.grad_to_input0(kZeroReduceScatter, {g.dy()}, {});
}

Result<void> all_reduce_grad(GradContext& g) {
  return g.accumulate(g.in(0), g.dy());
}
Result<void> copy_to_parallel_grad(GradContext& g) {
  return g.grad_to_input0("comm.all_reduce", {g.dy()}, {});
}
Result<void> all_gather_grad(GradContext& g) {
  return g.grad_to_input0("comm.chunk", {g.dy()}, {});
}
Result<void> chunk_grad(GradContext& g) {
  return g.grad_to_input0("comm.all_gather", {g.dy()}, {});
}

OpInfo collective(std::string_view name, HostKind kind, ShapeFn shape, GradFn grad,
                  std::vector<std::string_view> grad_ops) {
  return {.name = name,
          .section = "host_run",
          .inputs = {{"x"}},
          .outputs = {{"y"}},
          .flags = kHostRun | kCollective,
          .shape = shape,
          .grad = grad,
          .grad_ops = std::move(grad_ops),
          .host = kind};
}

// ZeRO's ops of the optimizer phase, or that average a gradient: none of
// them is differentiated.
OpInfo zero_op(std::string_view name, HostKind kind, ShapeFn shape) {
  OpInfo op = collective(name, kind, shape, nullptr, {});
  op.no_grad = "the optimizer phase's (ZeRO)";
  return op;
}

}  // namespace

std::vector<OpInfo> host_run_ops() {
  return {
      collective(kAllReduce, HostKind::AllReduce, same_shape, all_reduce_grad, {}),
      collective(kCopyToParallel, HostKind::CopyToParallel, same_shape, copy_to_parallel_grad, {kAllReduce}),
      collective(kAllGather, HostKind::AllGather, gather_shape, all_gather_grad, {kChunk}),
      collective(kChunk, HostKind::Chunk, chunk_shape, chunk_grad, {kAllGather}),
      {.name = kDeviceCopy,
       .section = "host_run",
       .inputs = {{"x"}},
       .outputs = {{"y"}},
       .flags = kHostRun,
       .shape = same_shape,
       .no_grad = "inserted by placement after autodiff",
       .host = HostKind::DeviceCopy},
      zero_op(kZeroShard, HostKind::ZeroShard, shard_shape),
      zero_op(kZeroReduceScatter, HostKind::ZeroReduceScatter, shard_shape),
      {.name = kZeroGather,
       .section = "host_run",
       .inputs = {{"shard"}, {"x"}},
       .outputs = {{"x_out"}},
       .inplace = {{0, 1, true}},
       .flags = kHostRun | kCollective,
       .shape = gather_shards_shape,
       .no_grad = "the optimizer phase's (ZeRO)",
       .host = HostKind::ZeroGather},
      zero_op(kZeroAllReduce, HostKind::ZeroAllReduce, same_shape),
      collective(kZeroAllGather, HostKind::ZeroAllGather, all_gather_shape, all_gather_shards_grad,
                 {kZeroReduceScatter}),
      {.name = kZeroWait,
       .section = "host_run",
       .inputs = {{"x"}, {"keep"}},
       .outputs = {{"y"}},
       .inplace = {{0, 0, true}},
       .flags = kHostRun | kCollective,
       .shape = same_shape,
       .no_grad = "inserted after autodiff (ZeRO's overlap)",
       .host = HostKind::ZeroWait}};
}

}  // namespace tandem::host::ops
