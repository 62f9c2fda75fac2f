#include "train/initializers.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "data/counter_rng.hpp"
#include "exec/tensor_text.hpp"
#include "ops/shapes.hpp"
#include "tandem/half.hpp"
#include "train/tensor_shards.hpp"

namespace tandem::host::train {
namespace {

uint64_t name_hash(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

double normal(uint64_t seed, uint64_t stream, uint64_t i) {
  const double u1 = 1.0 - data::random_unit(seed, stream, 2 * i);
  const double u2 = data::random_unit(seed, stream, 2 * i + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace

std::vector<float> initial_values(const lowering::Initializer& init, const std::string& name, int64_t count,
                                  uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(count), 0.f);
  const uint64_t stream = name_hash(name);
  const double fan_in = static_cast<double>(init.fan_in), fan_out = static_cast<double>(init.fan_out);
  const std::string& m = init.method;
  double stddev = 0, bound = 0;
  if (m == "ones") std::fill(v.begin(), v.end(), 1.f);
  if (m == "kaiming") stddev = std::sqrt(2.0 / fan_in);
  if (m == "xavier") stddev = std::sqrt(2.0 / (fan_in + fan_out));
  if (m == "normal") stddev = init.std;
  if (m == "kaiming_uniform") bound = std::sqrt(6.0 / fan_in);
  if (m == "xavier_uniform") bound = std::sqrt(6.0 / (fan_in + fan_out));
  for (int64_t i = 0; i < count && stddev > 0; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(stddev * normal(seed, stream, static_cast<uint64_t>(i)));
  for (int64_t i = 0; i < count && bound > 0; ++i)
    v[static_cast<size_t>(i)] =
        static_cast<float>(bound * (2.0 * data::random_unit(seed, stream, static_cast<uint64_t>(i)) - 1.0));
  return v;
}

Result<void> initialise_tensors(const lowering::ModelGraph& model, exec::Executor& executor, uint64_t seed,
                                int zero_rank) {
  const Graph& g = model.graph;
  for (size_t i = 0; i < g.value_count(); ++i) {
    const Value& v = *g.value_at(i);
    if (v.kind != TDM_VALUE_PARAMETER && v.kind != TDM_VALUE_STATE) continue;
    auto init = model.initializers.find(v.id);
    if (init == model.initializers.end()) {
      if (auto r = executor.fill(v.id, v.initial_value.value_or(0.0)); !r) return r;
      continue;
    }
    // The values of the tensor this rank holds, or (ZeRO stage 3) of which
    // it holds one shard: the whole tensor's, or its tensor-parallel slice.
    auto zero = model.zero.parameters.find(v.id);
    const bool sharded = zero != model.zero.parameters.end();
    std::vector<float> values;
    if (auto slice = model.shards.find(v.id); slice != model.shards.end()) {
      const auto full = initial_values(init->second, v.name, ops::numel(slice->second.full), seed);
      std::vector<std::byte> whole(full.size() * sizeof(float));
      std::memcpy(whole.data(), full.data(), whole.size());
      const auto mine = slice_of(whole, slice->second, model.tensor_parallel.rank, model.tensor_parallel.size,
                                 sizeof(float));
      values.resize(mine.size() / sizeof(float));
      std::memcpy(values.data(), mine.data(), mine.size());
    } else {
      values = initial_values(init->second, v.name, ops::numel(sharded ? zero->second : v.type.dims), seed);
    }
    if (sharded) {  // this data rank's shard of them, padded with zeros
      const auto range =
          ops::zero_shard_range(static_cast<int64_t>(values.size()), model.zero.world, zero_rank);
      std::vector<float> shard(static_cast<size_t>(ops::numel(v.type.dims)), 0.0f);
      std::copy_n(values.begin() + range.begin, range.count, shard.begin());
      values = std::move(shard);
    }
    if (v.type.dtype == TDM_BF16) {  // a bf16 LoRA base (lowering/lora_base.hpp) started afresh
      std::vector<uint16_t> narrow(values.size());
      for (size_t k = 0; k < values.size(); ++k) narrow[k] = f32_to_bf16(values[k]);
      if (auto r = executor.write(v.id, narrow.data(), narrow.size() * sizeof(uint16_t)); !r) return r;
      continue;
    }
    if (auto r = executor.write(v.id, values.data(), values.size() * sizeof(float)); !r) return r;
  }
  std::vector<const Value*> copies;
  for (size_t i = 0; i < g.value_count(); ++i)
    if (!g.value_at(i)->copy_of.empty()) copies.push_back(g.value_at(i));
  return copy_states_from_sources(g, executor, copies);
}

Result<void> copy_states_from_sources(const Graph& graph, exec::Executor& executor,
                                      const std::vector<const Value*>& states) {
  std::vector<std::byte> bytes;
  for (const Value* state : states) {
    const Value* source = graph.value_by_name(state->copy_of);
    if (source == nullptr)
      return make_error("state '" + state->name + "' starts as a copy of '" + state->copy_of +
                            "', which the training graph no longer has (a later pass removed it)",
                        TDM_INVALID_ARGUMENT);
    // The same type when added; checked again as later lowerings may
    // change a source's type.
    if (source->type.dtype != state->type.dtype || source->type.dims != state->type.dims)
      return make_error("state '" + state->name + "' (" + ops::dims_str(state->type.dims) +
                            ") starts as a copy of '" + source->name + "', which this run holds as " +
                            ops::dims_str(source->type.dims) + " (internal: a lowering changed it)",
                        TDM_INTERNAL);
    bytes.resize(exec::tensor_bytes(source->type));
    if (auto r = executor.read(source->id, bytes.data(), bytes.size()); !r) return r;
    if (auto r = executor.write(state->id, bytes.data(), bytes.size()); !r) return r;
  }
  return {};
}

}  // namespace tandem::host::train
