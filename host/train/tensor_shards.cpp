#include "train/tensor_shards.hpp"

#include <algorithm>
#include <cstring>

#include "exec/tensor_text.hpp"
#include "ops/shapes.hpp"

namespace tandem::host::train {
namespace {

// A shape as [outer, along the axis, inner] in elements.
struct Split {
  size_t outer = 1, along = 1, inner = 1;
};

Split split_of(const lowering::Shard& shard) {
  Split s;
  for (size_t i = 0; i < shard.full.size(); ++i) {
    const auto d = static_cast<size_t>(shard.full[i]);
    if (i < static_cast<size_t>(shard.axis))
      s.outer *= d;
    else if (i == static_cast<size_t>(shard.axis))
      s.along = d;
    else
      s.inner *= d;
  }
  return s;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace

std::map<std::string, lowering::Shard> tensor_shards(const lowering::ModelGraph& model) {
  std::map<std::string, lowering::Shard> by_parameter;
  for (const auto& [id, shard] : model.shards) by_parameter[model.graph.value(id)->name] = shard;
  std::map<std::string, lowering::Shard> out;
  for (size_t i = 0; i < model.graph.value_count(); ++i) {
    const Value& v = *model.graph.value_at(i);
    if (v.kind != TDM_VALUE_PARAMETER && v.kind != TDM_VALUE_STATE) continue;
    for (const auto& [name, shard] : by_parameter)
      if (v.name == name || v.copy_of == name || starts_with(v.name, "optim." + name + ".") ||
          v.name == "grad_accum." + name + ".grad")
        out[v.name] = shard;
  }
  return out;
}

std::vector<std::byte> slice_of(const std::vector<std::byte>& whole, const lowering::Shard& shard, int rank,
                                int size, size_t element) {
  const Split s = split_of(shard);
  const size_t local = s.along / static_cast<size_t>(size);
  const size_t row = local * s.inner * element;  // bytes of one outer index's slice
  std::vector<std::byte> out(s.outer * row);
  for (size_t o = 0; o < s.outer; ++o)
    std::memcpy(out.data() + o * row,
                whole.data() + ((o * s.along + static_cast<size_t>(rank) * local) * s.inner) * element, row);
  return out;
}

std::vector<std::byte> assemble(const std::vector<std::byte>& slices, const lowering::Shard& shard, int size,
                                size_t element) {
  const Split s = split_of(shard);
  const size_t local = s.along / static_cast<size_t>(size);
  const size_t row = local * s.inner * element;
  const size_t per_rank = s.outer * row;
  std::vector<std::byte> whole(per_rank * static_cast<size_t>(size));
  for (size_t r = 0; r < static_cast<size_t>(size); ++r)
    for (size_t o = 0; o < s.outer; ++o)
      std::memcpy(whole.data() + ((o * s.along + r * local) * s.inner) * element,
                  slices.data() + r * per_rank + o * row, row);
  return whole;
}

Result<void> slice_checkpoint(checkpoint::Checkpoint& cp,
                              const std::map<std::string, lowering::Shard>& shards, int rank, int size,
                              const std::string& source) {
  for (checkpoint::TensorRecord& t : cp.tensors) {
    auto it = shards.find(t.name);
    if (it == shards.end()) continue;
    if (t.shape != it->second.full)
      return make_error(source + ": tensor '" + t.name + "' is " + ops::dims_str(t.shape) +
                            " but the model needs it whole as " + ops::dims_str(it->second.full) +
                            " to split it over " + std::to_string(size) + " ranks",
                        TDM_INVALID_ARGUMENT);
    t.data = slice_of(t.data, it->second, rank, size, exec::dtype_size(t.dtype));
    t.shape[static_cast<size_t>(it->second.axis)] /= size;
  }
  return {};
}

std::map<std::string, std::vector<int64_t>> zero_states(const lowering::ModelGraph& model) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& [id, whole] : model.zero.states) out[model.graph.value(id)->name] = whole;
  for (const auto& [id, whole] : model.zero.parameters) out[model.graph.value(id)->name] = whole;
  // Accumulators of gradient shards (grad_accum), by the pass's naming.
  for (const auto& [id, whole] : model.zero.gradients)
    if (const Value* acc = model.graph.value_by_name("grad_accum." + model.graph.value(id)->name))
      out[acc->name] = whole;
  // A feature's state copied from a shard (graph->state_add_copy) is one too.
  for (size_t i = 0; i < model.graph.value_count(); ++i) {
    const Value& v = *model.graph.value_at(i);
    if (auto source = out.find(v.copy_of); !v.copy_of.empty() && source != out.end())
      out[v.name] = source->second;
  }
  return out;
}

std::vector<std::byte> zero_assemble(const std::vector<std::byte>& shards, const std::vector<int64_t>& whole,
                                     size_t element) {
  const auto bytes = static_cast<size_t>(numel(whole)) * element;
  return {shards.begin(), shards.begin() + static_cast<std::ptrdiff_t>(bytes)};
}

Result<void> zero_slice_checkpoint(checkpoint::Checkpoint& cp,
                                   const std::map<std::string, std::vector<int64_t>>& states, int rank,
                                   int world, const std::string& source) {
  for (checkpoint::TensorRecord& t : cp.tensors) {
    auto it = states.find(t.name);
    if (it == states.end()) continue;
    const int64_t shard = lowering::zero_shard_elements(numel(it->second), world);
    if (t.shape == std::vector<int64_t>{shard} && t.shape != it->second)
      continue;  // this rank's shard already
    if (t.shape != it->second)
      return make_error(source + ": tensor '" + t.name + "' is " + ops::dims_str(t.shape) +
                            " but the model needs it whole as " + ops::dims_str(it->second) +
                            " to shard it over " + std::to_string(world) + " ranks ([train] zero)",
                        TDM_INVALID_ARGUMENT);
    const size_t element = exec::dtype_size(t.dtype);
    const auto range = ops::zero_shard_range(numel(it->second), world, rank);
    std::vector<std::byte> mine(static_cast<size_t>(shard) * element, std::byte{0});
    std::memcpy(mine.data(), t.data.data() + static_cast<size_t>(range.begin) * element,
                static_cast<size_t>(range.count) * element);
    t.data = std::move(mine);
    t.shape = {shard};
  }
  return {};
}

}  // namespace tandem::host::train
