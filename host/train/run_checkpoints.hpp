// A training run's checkpoints as its ranks write and read them: which
// tensors are split (tensor parallelism's slices, ZeRO's shards), the
// metadata that identifies the run, and the two formats. Alone or with data
// parallelism, rank 0 writes one file; tensor-parallel ranks first gather
// their slices and ZeRO's ranks their shards ("whole"), or with ZeRO alone
// every data-parallel rank writes its own shard file ("sharded",
// sharded_checkpoint.hpp), and with pipeline parallelism one rank of each
// stage writes the stage's tensors ("sharded", the default; "whole": each
// stage's first rank sends them to rank 0, which writes one file).
// Reading gives each rank its slices and shards.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "device/device.hpp"
#include "model/model_spec.hpp"
#include "plugin/registry.hpp"
#include "program/program.hpp"
#include "train/distributed.hpp"

namespace tandem::host::train {

class RunCheckpoints {
 public:
  // The communicators of a run of several ranks (all null alone): every
  // rank, and those that exchange tensor-parallel slices and ZeRO's shards
  // (the same as `all` unless the run has both kinds of parallelism), and
  // with pipeline parallelism the ranks that differ only in their stage.
  struct Ranks {
    GradientCommunicator* all = nullptr;
    GradientCommunicator* tensor = nullptr;
    GradientCommunicator* data = nullptr;
    GradientCommunicator* stages = nullptr;
  };
  // `format`: "sharded" or "whole" (--checkpoint-format).
  RunCheckpoints(const model::ModelSpec& spec, const DeviceHandle& device, const PluginRegistry& registry,
                 program::Program& program, std::string run_dir, std::string format, Ranks ranks);

  // Writes the checkpoint of this position (every rank calls it); the path
  // rank 0 wrote, empty on the other ranks.
  Result<std::string> save(int64_t step, int64_t epoch, int64_t next_batch, int64_t total_steps);
  // `cp`'s tensors (named by their run values, read on this rank) made
  // whole: tensor-parallel slices and ZeRO shards gathered from the ranks
  // that hold them. Every rank calls it with the same tensors; afterwards
  // rank 0 holds them whole (the other ranks' copies are unspecified).
  Result<void> make_whole(checkpoint::Checkpoint& cp);
  // Whether this rank takes part in make_whole (the others need not read
  // their tensors): rank 0, the ranks of its tensor-parallel group, and
  // with ZeRO every rank (the other data-parallel groups hold the same
  // slices).
  bool gathers() const;
  // `file` (a .safetensors file or a .sharded directory), as this rank
  // holds its tensors: its slices and shards.
  Result<checkpoint::Checkpoint> load(const std::string& file) const;

 private:
  std::map<std::string, std::string> metadata(int64_t step, int64_t epoch, int64_t next_batch,
                                              int64_t total_steps) const;
  // Every rank's shards of ZeRO's state gathered into `cp`'s whole tensors.
  Result<void> gather_shards(checkpoint::Checkpoint& cp);
  Result<void> gather_slices(checkpoint::Checkpoint& cp);
  Result<std::string> save_shards(checkpoint::Checkpoint cp, int64_t step);
  // Pipeline parallelism: the tensors this rank's stage holds, made whole.
  Result<checkpoint::Checkpoint> collect_stage(std::map<std::string, std::string> meta);
  Result<std::string> save_stages(std::map<std::string, std::string> meta, int64_t step);
  Result<std::string> save_stages_whole(std::map<std::string, std::string> meta, int64_t step);
  Result<std::string> publish_shards(const Result<void>& wrote, int64_t step);

  const model::ModelSpec* spec_;
  const DeviceHandle* device_;
  const PluginRegistry* registry_;
  program::Program* program_;
  std::string run_dir_, format_;
  Ranks ranks_;
  std::map<std::string, lowering::Shard> slices_;       // split by tensor parallelism, by name
  std::map<std::string, std::vector<int64_t>> shards_;  // ZeRO's sharded state: its whole shape
};

}  // namespace tandem::host::train
