// Memory plan of one graph on one device: where every value lives.
//
// Persistent values survive between runs: PARAMETER, STATE, GRADIENT (kept
// across the step so gradient accumulation can add into them) and INPUT,
// and any value without a producer. They are packed into one allocation,
// each at a kPersistentAlignment boundary: a device allocator that rounds
// every allocation to its size classes (the cuda plugin's 2 MiB above
// 1 MiB) would otherwise take nearly twice the bytes of a 2.25 MiB weight,
// and as much again for its gradient and each optimizer moment.
// A persistent value the caller streams (StreamRequest) is not in that
// block: its home is host memory, and each of its residencies
// (stream_plan.hpp) is an arena block over the positions it holds, packed
// with the activations below.
// Transient values (ACTIVATION produced by a node) share one arena. Each
// lives from its producer's schedule position to its last consumer's (a
// value nobody reads lives at its producer only); two values may share bytes
// when those intervals are disjoint. Offsets come from greedy-by-size:
// largest first, each at the lowest 64-byte aligned offset that overlaps no
// already-placed value whose interval overlaps its own.
//
// In-place (ops::inplace_pairs, the op table's, then its reuse pairs,
// ops::reuse_pairs, which take only the transient case): an output shares
// the storage of the first of its pairs that fits when
//   - the input's storage is persistent (the update of a parameter, an
//     optimizer moment, a running statistic: the point of the op), or
//   - both are transient and the input is dead after that node, so nothing
//     later reads the clobbered bytes; the shared block then lives for the
//     union of both intervals, or
//   - both are transient and the op is a view (ops::kView, reshape): it
//     writes nothing, so its output shares the input's block even while the
//     input lives on, and the block lives for the union of both intervals
//     (a view of a persistent tensor is a copy: see bind_inplace).
// Otherwise the output gets storage of its own (kernels must accept that).
// Both sides of an in-place pair must have the same layout (plain or native).
// A transient value listed in `outputs` is never overwritten in place: the
// host reads it after the run, and a composed executor's copies read the
// values other devices need (split.hpp `exported`) while later nodes run.
// Nodes run one at a time on one stream, so one workspace buffer of the
// largest per-node need serves them all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "exec/stream_plan.hpp"
#include "graph/graph.hpp"
#include "util/result.hpp"

namespace tandem::host::exec {

inline constexpr size_t kArenaAlignment = 64;
// Where each persistent value starts in the executor's one block of them:
// the alignment device allocations have (cudaMalloc's 256 bytes), which the
// vendor libraries' fastest kernels expect of their operands.
inline constexpr size_t kPersistentAlignment = 256;

// The bytes a persistent value of `bytes` takes in that block.
inline size_t persistent_slot(size_t bytes) {
  return (bytes + kPersistentAlignment - 1) / kPersistentAlignment * kPersistentAlignment;
}

enum class MemoryCategory { Parameters, Gradients, OptimizerState, OtherState, Inputs, Activations };

struct ValueStorage {
  enum class Kind { Persistent, Arena };
  Kind kind = Kind::Arena;
  size_t persistent = 0;       // Persistent: index into Plan::persistent
  size_t offset = 0;           // Arena: byte offset, 64-byte aligned
  size_t bytes = 0;            // this value's own size
  ValueId owner = kNoValue;    // the value whose storage this is (itself unless in-place)
  size_t first = 0, last = 0;  // Arena: its own live interval, schedule positions (inclusive)
  TensorType type;             // dtype and dims of this value
  // ABI 1.3: the bytes are in the backend's native layout (native_layouts.hpp),
  // `native_bytes` of them (padding included); the host must not read or
  // write them. Only arena values are ever native.
  bool native = false;
  size_t native_bytes = 0;
  size_t arena_bytes() const { return native ? native_bytes : bytes; }
};

struct PersistentBuffer {
  ValueId value = kNoValue;  // the owner; in-place outputs alias it
  std::string name;
  size_t bytes = 0;
  MemoryCategory category = MemoryCategory::OtherState;
  // An input the executor double-buffers so the next batch can be copied in
  // while a step runs (plan_staged_input): twice `bytes` on the device.
  bool staged = false;
  // Its home is host memory; on the device only during its residencies
  // (Plan::residencies, in the arena): StreamRequest.
  bool streamed = false;
};

// Bytes per category; total is their sum. optimizer_state: STATE values
// named "optim.*" or read by sgd_update/adamw_update.
struct MemoryEstimate {
  uint64_t parameters = 0;
  uint64_t gradients = 0;
  uint64_t optimizer_state = 0;
  uint64_t other_state = 0;
  uint64_t inputs = 0;
  uint64_t activations = 0;  // the arena
  uint64_t workspace = 0;
  // The run's own device buffers beside the graph's values (plan_buffer):
  // the data-parallel all-reduce's gradient bucket buffer.
  uint64_t buffers = 0;
  // Allocations are whole blocks of the device allocator's granule
  // (device/device_allocator.hpp) and of the backend's size classes (its
  // mem_footprint): what that adds beyond the bytes above, with the
  // alignment of each persistent value in their one block.
  uint64_t allocator_rounding = 0;
  uint64_t total = 0;
  // Streamed values (StreamRequest): their bytes at home in host memory,
  // not in the categories above nor in total; and the most of them on the
  // device at once (the window, part of `activations`: the arena).
  uint64_t streamed_home = 0;
  uint64_t window = 0;
};

// Persistent values (storage owners) to stream through the device instead
// of keeping there (stream_plan.hpp), and how many units ahead to fetch.
struct StreamRequest {
  std::set<ValueId> values;
  size_t depth = 1;
};

// What one allocation of n bytes takes on the device: the device
// allocator's granule, then the backend's own rounding (ABI 1.6
// mem_footprint; DeviceHandle::allocation_footprint). Empty: the granule.
using AllocationFootprint = std::function<uint64_t(uint64_t)>;

struct Plan {
  std::map<ValueId, ValueStorage> values;  // every value of the graph
  std::vector<PersistentBuffer> persistent;
  size_t arena_bytes = 0;
  size_t workspace_bytes = 0;
  uint64_t activations_unshared = 0;  // sum of transient values, for comparison
  // Bytes kept free after every value for --check-bounds (0: none): each
  // arena block is that much larger, and each persistent buffer is
  // allocated that much larger (not counted in `estimate`: a debug mode).
  size_t guard_bytes = 0;
  MemoryEstimate estimate;
  AllocationFootprint footprint;  // what make_plan was given
  // Of the streamed values, with their arena offsets; each one's
  // PersistentBuffer says its size and home.
  std::vector<Residency> residencies;

  const ValueStorage* find(ValueId id) const;
};

// `workspace_per_node[i]` is the workspace of the node at schedule position
// i (empty or short: 0). Errors on an in-place pair naming missing slots.
// `outputs`: values the host reads after a run; they stay live to the end of
// the schedule, so no later value reuses their bytes. `native`: values in the
// backend's native layout and their native byte sizes (their arena slots are
// that big; an in-place pair never mixes a native and a plain value).
// `guard_bytes`: Plan::guard_bytes. `footprint`: how the device rounds
// each allocation the executor will make, counted in estimate.
// `reuse_operands`: bind the op table's reuse pairs (a backend of ABI 1.9
// or newer, sdk/ABI.md rule 31); false: only the catalog's other pairs.
// `stream`: persistent values homed in host memory, their residencies
// packed into the arena beside the activations; a value there that is not
// persistent (an activation) is refused.
Result<Plan> make_plan(const Graph& graph, const std::vector<size_t>& workspace_per_node,
                       const std::set<ValueId>& outputs = {}, const std::map<ValueId, uint64_t>& native = {},
                       size_t guard_bytes = 0, AllocationFootprint footprint = {}, bool reuse_operands = true,
                       const StreamRequest& stream = {});

// The workspace a ZeRO node ("zero.*") needs over `world` ranks: the padded
// whole of world shards, where they cover more than the tensor's elements
// (0 for any other node).
size_t zero_scratch_bytes(const Graph& graph, const Node& node, int world);
// Whether `node` is one of ZeRO's exchanges that runs while later nodes
// compute: a zero.wait reads its output (lowering/zero_overlap.hpp). Its
// padded copy cannot be the node's workspace, which those nodes use
// meanwhile: zero_scratch_bytes is 0 for it, and the executor keeps one
// buffer of exchange_staging_bytes for all of them (they run one at a time,
// in order), counted with plan_buffer.
bool overlapped_exchange(const Graph& graph, const Node& node);
size_t exchange_staging_bytes(const Graph& graph, int world);

// Counts one more device buffer of `bytes` the run allocates beside the
// graph (Executor::reserve_buffer) in plan.estimate.
void plan_buffer(Plan& plan, uint64_t bytes);

// Accounts a second buffer of the input value `id` (its bytes added to
// estimate.inputs and estimate.total); already staged: nothing changes.
// Anything but an INPUT is refused, naming the value and what it is.
Result<void> plan_staged_input(Plan& plan, ValueId id);

const char* category_name(MemoryCategory category);
// The field of `e` that counts the bytes of `category`.
uint64_t& bytes_of(MemoryEstimate& e, MemoryCategory category);

}  // namespace tandem::host::exec
