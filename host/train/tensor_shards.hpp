// Tensor parallelism and checkpoints: a checkpoint always holds whole
// tensors, as one process would train them, so a run can resume with another
// number of ranks (or none) and `tandem eval` needs no ranks at all. Each
// rank slices its part out when loading and initialising, and the slices are
// gathered into whole tensors when saving.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "lowering/model_graph.hpp"

namespace tandem::host::train {

// Every persistent tensor split like a parameter, by name: the parameter, its
// optimizer state ("optim.<parameter>.*"), accumulators of its gradient
// ("grad_accum.<parameter>.grad") and states a feature copied from it
// (Value::copy_of).
std::map<std::string, lowering::Shard> tensor_shards(const lowering::ModelGraph& model);

// Rank `rank` of `size`'s slice of `whole` (shape `shard.full`, elements of
// `element` bytes).
std::vector<std::byte> slice_of(const std::vector<std::byte>& whole, const lowering::Shard& shard, int rank,
                                int size, size_t element);
// The whole tensor from every rank's slice, concatenated rank after rank.
std::vector<std::byte> assemble(const std::vector<std::byte>& slices, const lowering::Shard& shard, int size,
                                size_t element);

// In place: every sharded tensor of `cp` (whole, as saved) becomes this
// rank's slice. A tensor whose shape is not the whole one is an error naming
// it and `source`.
Result<void> slice_checkpoint(checkpoint::Checkpoint& cp,
                              const std::map<std::string, lowering::Shard>& shards, int rank, int size,
                              const std::string& source);

// ZeRO: the optimizer state (and with stage 3 the parameters) this rank
// holds one shard of (ModelGraph::zero), and states a feature copied from
// one, by name, with its whole shape. Checkpoints hold it whole, as for
// tensor parallelism, so a run resumes at any number of ranks or any stage.
std::map<std::string, std::vector<int64_t>> zero_states(const lowering::ModelGraph& model);
// Every rank's shard of a tensor (`shards`: world shards of s elements,
// rank-major) as the whole tensor of shape `whole`.
std::vector<std::byte> zero_assemble(const std::vector<std::byte>& shards, const std::vector<int64_t>& whole,
                                     size_t element);
// In place: every ZeRO state of `cp` (whole, as saved) becomes rank `rank`'s
// shard of `world`, zero-padded (one read as this rank's shard already,
// sharded_checkpoint.hpp, stays); an error names a tensor of another shape
// and `source`.
Result<void> zero_slice_checkpoint(checkpoint::Checkpoint& cp,
                                   const std::map<std::string, std::vector<int64_t>>& states, int rank,
                                   int world, const std::string& source);

}  // namespace tandem::host::train
