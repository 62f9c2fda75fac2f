#include "exec/planner.hpp"

#include <algorithm>
#include <iterator>
#include <unordered_map>

#include "device/device_allocator.hpp"
#include "exec/tensor_text.hpp"
#include "ops/op_table.hpp"

namespace tandem::host::exec {
namespace {

size_t align_up(size_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

bool is_transient(const Value& value) {
  return value.kind == TDM_VALUE_ACTIVATION && value.producer != kNoNode;
}

MemoryCategory category_of(const Graph& graph, const Value& value) {
  switch (value.kind) {
    case TDM_VALUE_PARAMETER:
      return MemoryCategory::Parameters;
    case TDM_VALUE_GRADIENT:
      return MemoryCategory::Gradients;
    case TDM_VALUE_INPUT:
      return MemoryCategory::Inputs;
    case TDM_VALUE_STATE: {
      if (value.name.rfind("optim.", 0) == 0) return MemoryCategory::OptimizerState;
      for (NodeId id : graph.consumers(value.id))
        if (ops::is(graph.node(id)->op, ops::kOptimizer)) return MemoryCategory::OptimizerState;
      return MemoryCategory::OtherState;
    }
    default:  // an activation nobody produces: fed from outside, kept
      return MemoryCategory::OtherState;
  }
}

// One arena block: a transient value and the in-place outputs sharing it.
struct Block {
  ValueId owner = kNoValue;
  size_t bytes = 0;  // aligned
  size_t first = 0, last = 0;
  size_t offset = 0;
};

bool overlaps(const Block& a, const Block& b) {
  return !(a.last < b.first || b.last < a.first);
}

// Greedy by size: largest first, lowest offset clear of every placed block
// live at the same time. Returns the arena size.
size_t place_blocks(std::vector<Block>& blocks) {
  std::vector<size_t> order(blocks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (blocks[a].bytes != blocks[b].bytes) return blocks[a].bytes > blocks[b].bytes;
    return blocks[a].first < blocks[b].first;
  });
  std::vector<size_t> placed;
  size_t arena = 0;
  for (size_t index : order) {
    Block& block = blocks[index];
    std::vector<const Block*> live;
    for (size_t other : placed)
      if (blocks[other].bytes > 0 && overlaps(blocks[other], block)) live.push_back(&blocks[other]);
    std::sort(live.begin(), live.end(), [](const Block* a, const Block* b) { return a->offset < b->offset; });
    size_t offset = 0;
    for (const Block* other : live) {
      if (offset + block.bytes <= other->offset) break;  // fits in the gap below `other`
      offset = std::max(offset, other->offset + other->bytes);
    }
    block.offset = offset;
    arena = std::max(arena, offset + block.bytes);
    placed.push_back(index);
  }
  return arena;
}

// Live intervals and own sizes of every value; owners are themselves.
Result<std::map<ValueId, ValueStorage>> describe_values(const Graph& graph,
                                                        const std::set<ValueId>& outputs) {
  std::map<NodeId, size_t> position;
  // Each value's last reader, in one pass: asking the graph for every
  // value's consumers scans the schedule per value, and automatic placement
  // plans hundreds of candidate graphs.
  std::unordered_map<ValueId, size_t> last_read;
  for (size_t i = 0; i < graph.node_count(); ++i) {
    const Node& node = *graph.node_at(i);
    position[node.id] = i;
    for (ValueId input : node.inputs) last_read[input] = i;
  }
  std::map<ValueId, ValueStorage> values;
  for (size_t i = 0; i < graph.value_count(); ++i) {
    const Value& value = *graph.value_at(i);
    ValueStorage storage;
    storage.kind = is_transient(value) ? ValueStorage::Kind::Arena : ValueStorage::Kind::Persistent;
    storage.bytes = tensor_bytes(value.type);
    storage.owner = value.id;
    storage.type = value.type;
    if (is_transient(value)) {
      auto producer = position.find(value.producer);
      if (producer == position.end())
        return make_error("value '" + value.name + "' has a producer outside the schedule",
                          TDM_INVALID_ARGUMENT);
      storage.first = storage.last = producer->second;
      if (auto read = last_read.find(value.id); read != last_read.end())
        storage.last = std::max(storage.last, read->second);
      // The host reads these after a run: nothing may reuse their bytes.
      if (outputs.count(value.id) > 0) storage.last = graph.node_count() - 1;
    }
    values.emplace(value.id, std::move(storage));
  }
  return values;
}

// Binds in-place outputs to their input's owner where that is safe (see
// planner.hpp). `block_last` is where each owner's shared block dies: its own
// last use, widened by the outputs bound to it. Values keep their own intervals.
void bind_inplace(const Graph& graph, const std::set<ValueId>& outputs, bool reuse_operands,
                  std::map<ValueId, ValueStorage>& values, std::map<ValueId, size_t>& block_last) {
  for (size_t position = 0; position < graph.node_count(); ++position) {
    const Node& node = *graph.node_at(position);
    // A view (ops::kView: reshape) writes nothing; the catalog's in-place
    // pairs are writes, so its one pair is added here, not there.
    const bool view =
        ops::is(node.op, ops::kView) && node.inputs.at(0) != kNoValue && node.outputs.at(0) != kNoValue;
    auto pairs = view ? std::vector<std::pair<size_t, size_t>>{{0, 0}} : ops::inplace_pairs(node);
    const size_t reuse_from = pairs.size();
    if (!view && reuse_operands) std::ranges::copy(ops::reuse_pairs(node), std::back_inserter(pairs));
    std::set<ValueId> bound;                     // an output takes the first pair that fits
    for (size_t p = 0; p < pairs.size(); ++p) {  // only present slots
      const auto [out_index, in_index] = pairs[p];
      ValueId out = node.outputs[out_index];
      ValueId in = node.inputs[in_index];
      ValueStorage& output = values.at(out);
      ValueStorage& owner = values.at(values.at(in).owner);
      if (bound.count(out) > 0) continue;
      if (p >= reuse_from && owner.kind != ValueStorage::Kind::Arena) continue;
      if (output.bytes != owner.bytes || output.type.dtype != owner.type.dtype) continue;
      if (output.native != owner.native || output.arena_bytes() != owner.arena_bytes()) continue;
      if (owner.kind == ValueStorage::Kind::Arena) {
        // Transient: never a persistent output, and only into a dead input
        // unless the op is a view, which writes nothing (bytes stay as they
        // are): a live input and its view then share one block that lives
        // until the later of their last uses, and a later in-place write into
        // either is refused until both are dead.
        size_t& last = block_last.at(owner.owner);
        if (output.kind != ValueStorage::Kind::Arena) continue;
        if (!view && last != position) continue;
        // An output's last use is the end of the schedule, so this could
        // only happen at the last node; still, its bytes must survive.
        if (!view && outputs.count(in) > 0) continue;
        last = std::max(last, output.last);
      } else if (view) {
        // A view of a parameter or state keeps bytes of its own: that
        // tensor's in-place update (the optimizer's) may be scheduled before
        // the view's last reader.
        continue;
      }
      output.owner = owner.owner;
      output.kind = owner.kind;
      bound.insert(out);
    }
  }
}

// What an allocation of `bytes` adds beyond them: the device allocator hands
// out whole blocks of its granule, the backend perhaps larger ones.
uint64_t rounding(const Plan& plan, uint64_t bytes) {
  const uint64_t granule = DeviceAllocator::rounded(bytes);
  return std::max(granule, plan.footprint ? plan.footprint(bytes) : granule) - bytes;
}

// What a placed plan needs on its device, by category, with the
// allocator's rounding of every allocation the executor will make.
MemoryEstimate estimate_of(const Plan& plan) {
  MemoryEstimate e;
  for (const PersistentBuffer& buffer : plan.persistent) {
    if (buffer.streamed) {
      e.streamed_home += buffer.bytes;
      continue;
    }
    bytes_of(e, buffer.category) += buffer.bytes;
  }
  e.activations = plan.arena_bytes;
  e.workspace = plan.workspace_bytes;
  // Every allocation the executor makes takes a block of the device allocator's
  // granule, or of the backend's size class where that is larger; the
  // persistent values are one allocation, each value aligned in it.
  uint64_t persistent_bytes = 0, persistent_block = 0;
  for (const PersistentBuffer& buffer : plan.persistent) {
    if (buffer.streamed) continue;
    persistent_bytes += buffer.bytes;
    persistent_block += persistent_slot(buffer.bytes);
  }
  if (persistent_block > 0)
    e.allocator_rounding += persistent_block - persistent_bytes + rounding(plan, persistent_block);
  const bool any_transient =
      !plan.residencies.empty() || std::any_of(plan.values.begin(), plan.values.end(), [](const auto& v) {
        return v.second.kind == ValueStorage::Kind::Arena;
      });
  if (any_transient) e.allocator_rounding += rounding(plan, e.activations);
  if (e.workspace > 0) e.allocator_rounding += rounding(plan, e.workspace);
  std::vector<size_t> residency_bytes;
  for (const Residency& r : plan.residencies)
    residency_bytes.push_back(plan.persistent[plan.values.at(r.value).persistent].bytes);
  e.window = window_peak(plan.residencies, residency_bytes);
  e.total = e.parameters + e.gradients + e.optimizer_state + e.other_state + e.inputs + e.activations +
            e.workspace + e.allocator_rounding;
  return e;
}

// The residencies of the streamed values (stream_plan.hpp), each an arena
// block over its interval; marks their buffers streamed.
Result<void> plan_streaming(const Graph& graph, const StreamRequest& stream, Plan& plan,
                            std::vector<Block>& blocks, size_t guard_bytes) {
  std::set<ValueId> owners;
  for (ValueId id : stream.values) {
    const ValueStorage* storage = plan.find(id);
    if (storage == nullptr || storage->kind != ValueStorage::Kind::Persistent)
      return make_error(
          "cannot stream value " + std::to_string(id) +
              ": only persistent values (parameters, gradients, state) have a home to stream from",
          TDM_INVALID_ARGUMENT);
    PersistentBuffer& buffer = plan.persistent[plan.values.at(storage->owner).persistent];
    if (buffer.category == MemoryCategory::Inputs)
      return make_error(
          "cannot stream '" + buffer.name + "': it is an input the host writes each step (stage it instead)",
          TDM_INVALID_ARGUMENT);
    owners.insert(storage->owner);
    buffer.streamed = true;
  }
  std::vector<NodeTouches> nodes(graph.node_count());
  for (size_t p = 0; p < graph.node_count(); ++p) {
    const Node& node = *graph.node_at(p);
    nodes[p].layer = node.layer;
    for (ValueId v : node.inputs)
      if (v != kNoValue) nodes[p].reads.push_back(plan.values.at(v).owner);
    for (ValueId v : node.outputs)
      if (v != kNoValue) nodes[p].writes.push_back(plan.values.at(v).owner);
  }
  plan.residencies = plan_residencies(nodes, owners, stream.depth);
  for (const Residency& r : plan.residencies) {
    const size_t bytes = plan.persistent[plan.values.at(r.value).persistent].bytes;
    blocks.push_back({r.value, align_up(bytes + guard_bytes), r.start, r.end, 0});
  }
  return {};
}

size_t padded_exchange_bytes(const Graph& graph, const Node& node, int world) {
  const TensorType* whole = nullptr;
  const TensorType* shard = nullptr;
  switch (ops::host_kind(node.op)) {
    case ops::HostKind::ZeroReduceScatter:
      whole = &graph.value(node.inputs[0])->type, shard = &graph.value(node.outputs[0])->type;
      break;
    case ops::HostKind::ZeroGather:
      whole = &graph.value(node.inputs[1])->type, shard = &graph.value(node.inputs[0])->type;
      break;
    case ops::HostKind::ZeroAllGather:
      whole = &graph.value(node.outputs[0])->type, shard = &graph.value(node.inputs[0])->type;
      break;
    default:
      return 0;
  }
  const size_t padded = tensor_bytes(*shard) * static_cast<size_t>(world);
  return padded == tensor_bytes(*whole) ? 0 : padded;
}

}  // namespace

bool overlapped_exchange(const Graph& graph, const Node& node) {
  const ops::HostKind kind = ops::host_kind(node.op);
  if (kind != ops::HostKind::ZeroReduceScatter && kind != ops::HostKind::ZeroAllGather) return false;
  for (NodeId reader : graph.consumers(node.outputs[0]))
    if (graph.node(reader)->op == ops::kZeroWait) return true;
  return false;
}

size_t zero_scratch_bytes(const Graph& graph, const Node& node, int world) {
  return overlapped_exchange(graph, node) ? 0 : padded_exchange_bytes(graph, node, world);
}

size_t exchange_staging_bytes(const Graph& graph, int world) {
  size_t most = 0;
  for (size_t i = 0; i < graph.node_count(); ++i) {
    const Node& node = *graph.node_at(i);
    if (overlapped_exchange(graph, node)) most = std::max(most, padded_exchange_bytes(graph, node, world));
  }
  return most;
}

uint64_t& bytes_of(MemoryEstimate& e, MemoryCategory category) {
  switch (category) {
    case MemoryCategory::Parameters:
      return e.parameters;
    case MemoryCategory::Gradients:
      return e.gradients;
    case MemoryCategory::OptimizerState:
      return e.optimizer_state;
    case MemoryCategory::Inputs:
      return e.inputs;
    case MemoryCategory::Activations:
      return e.activations;
    default:
      return e.other_state;
  }
}

const char* category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::Parameters:
      return "parameters";
    case MemoryCategory::Gradients:
      return "gradients";
    case MemoryCategory::OptimizerState:
      return "optimizer state";
    case MemoryCategory::OtherState:
      return "other state";
    case MemoryCategory::Inputs:
      return "inputs";
    default:
      return "activations";
  }
}

Result<void> plan_staged_input(Plan& plan, ValueId id) {
  const ValueStorage* storage = plan.find(id);
  if (storage == nullptr)
    return make_error("cannot stage value " + std::to_string(id) + ": not in the plan", TDM_INVALID_ARGUMENT);
  if (storage->kind != ValueStorage::Kind::Persistent)
    return make_error("cannot stage value " + std::to_string(id) +
                          ": it is an activation a node produces; only inputs (a batch's features or "
                          "labels) can be staged",
                      TDM_INVALID_ARGUMENT);
  PersistentBuffer& buffer = plan.persistent[storage->persistent];
  if (buffer.category != MemoryCategory::Inputs || buffer.value != id)
    return make_error("cannot stage '" + buffer.name + "': it holds " + category_name(buffer.category) +
                          ", not an input; only inputs (a batch's features or labels) can be staged, write "
                          "the others with write()",
                      TDM_INVALID_ARGUMENT);
  if (buffer.staged) return {};
  buffer.staged = true;
  plan.estimate.inputs += buffer.bytes;
  plan.estimate.allocator_rounding += rounding(plan, buffer.bytes);
  plan.estimate.total += buffer.bytes + rounding(plan, buffer.bytes);
  return {};
}

void plan_buffer(Plan& plan, uint64_t bytes) {
  plan.estimate.buffers += bytes;
  plan.estimate.allocator_rounding += rounding(plan, bytes);
  plan.estimate.total += bytes + rounding(plan, bytes);
}

const ValueStorage* Plan::find(ValueId id) const {
  auto it = values.find(id);
  return it == values.end() ? nullptr : &it->second;
}

Result<Plan> make_plan(const Graph& graph, const std::vector<size_t>& workspace_per_node,
                       const std::set<ValueId>& outputs, const std::map<ValueId, uint64_t>& native,
                       size_t guard_bytes, AllocationFootprint footprint, bool reuse_operands,
                       const StreamRequest& stream) {
  auto described = describe_values(graph, outputs);
  if (!described) return described.error();
  Plan plan;
  plan.guard_bytes = guard_bytes;
  plan.footprint = std::move(footprint);
  plan.values = std::move(described.value());
  for (const auto& [id, bytes] : native) {
    auto it = plan.values.find(id);
    if (it == plan.values.end() || it->second.kind != ValueStorage::Kind::Arena)
      return make_error("value " + std::to_string(id) + " cannot be native: only arena values can",
                        TDM_INTERNAL);
    it->second.native = true;
    it->second.native_bytes = std::max<size_t>(bytes, it->second.bytes);
  }
  std::map<ValueId, size_t> block_last;
  for (const auto& [id, storage] : plan.values) block_last[id] = storage.last;
  bind_inplace(graph, outputs, reuse_operands, plan.values, block_last);

  std::vector<Block> blocks;
  std::map<ValueId, size_t> block_of;
  for (size_t i = 0; i < graph.value_count(); ++i) {
    const Value& value = *graph.value_at(i);
    ValueStorage& storage = plan.values.at(value.id);
    if (storage.kind == ValueStorage::Kind::Arena)
      plan.activations_unshared += align_up(storage.arena_bytes());
    if (storage.owner != value.id) continue;
    if (storage.kind == ValueStorage::Kind::Persistent) {
      storage.persistent = plan.persistent.size();
      plan.persistent.push_back({value.id, value.name, storage.bytes, category_of(graph, value)});
    } else {
      block_of[value.id] = blocks.size();
      blocks.push_back({value.id, align_up(storage.arena_bytes() + guard_bytes), storage.first,
                        block_last.at(value.id), 0});
    }
  }
  const size_t first_residency = blocks.size();
  if (!stream.values.empty())
    if (auto r = plan_streaming(graph, stream, plan, blocks, guard_bytes); !r) return r.error();
  plan.arena_bytes = place_blocks(blocks);
  for (size_t i = 0; i < plan.residencies.size(); ++i)
    plan.residencies[i].offset = blocks[first_residency + i].offset;

  // Owners are placed: every value takes its owner's place.
  for (auto& [id, storage] : plan.values) {
    const ValueStorage& owner = plan.values.at(storage.owner);
    if (storage.kind == ValueStorage::Kind::Persistent) {
      storage.persistent = owner.persistent;
    } else {
      storage.offset = blocks[block_of.at(storage.owner)].offset;
    }
  }

  for (size_t bytes : workspace_per_node) plan.workspace_bytes = std::max(plan.workspace_bytes, bytes);

  plan.estimate = estimate_of(plan);
  return plan;
}

}  // namespace tandem::host::exec
