// Checkpoints of a ZeRO run in shards (`--checkpoint-format sharded`, the
// default with [train] zero): no rank gathers the whole model. Each rank
// writes its shard of every sharded tensor, rank 0 also every tensor that
// is whole on each rank, into
//   <run-dir>/checkpoints/step-<step, 9 digits>.sharded/rank-<r, 5 digits>.safetensors
// Rank 0's file's metadata holds the run's position, the number of shards
// ("tandem.shards") and each sharded tensor's whole shape
// ("tandem.whole.<name>" = "17,8"). A pipeline's checkpoint
// ([train] pipeline_parallel) has one file per stage instead, each holding
// the whole tensors of the stage's layers ("tandem.shards_hold_stages").
// The files go into a ".partial" directory first; once every rank has written its own, rank 0 renames it, so
// a crash leaves either the whole checkpoint or none. Reading one assembles the whole tensors, so a sharded
// checkpoint resumes at any number of ranks or stage, and `tandem eval`, `export` and `--init-from` read it
// as a file. The run directory must be one every rank can write (one machine, or a shared file system).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "util/result.hpp"

namespace tandem::host::train {

// Whether `path` is a sharded checkpoint's directory ("….sharded").
bool is_sharded_checkpoint(const std::string& path);

// Rank `rank` of `world`: writes `cp` (this rank's tensors; `whole`: the
// whole shape of each sharded one, by name) as its shard of the checkpoint
// of `step`, not yet visible to readers.
Result<void> write_checkpoint_shard(const std::string& run_dir, int64_t step, int rank, int world,
                                    checkpoint::Checkpoint cp,
                                    const std::map<std::string, std::vector<int64_t>>& whole);
// Stage `stage` of `stages`: writes `cp` (the whole tensors the stage
// holds) as its file of the checkpoint of `step`, not yet visible.
Result<void> write_stage_checkpoint_shard(const std::string& run_dir, int64_t step, int stage, int stages,
                                          checkpoint::Checkpoint cp);
// Rank 0, after every rank wrote its shard: makes the checkpoint of `step`
// visible, then deletes the oldest checkpoints beyond `keep`. Its path.
Result<std::string> publish_checkpoint_shards(const std::string& run_dir, int64_t step, int64_t keep);

// The whole tensors of a sharded checkpoint; an incomplete or inconsistent
// one is an error naming the file and what is wrong.
Result<checkpoint::Checkpoint> read_sharded_checkpoint(const std::string& dir);
// Rank `rank` of a run of `world` ranks resuming from a sharded checkpoint
// of as many shards, every tensor of which the run shards too (`sharded`,
// by name): rank 0's file and this rank's own, each sharded tensor as this
// rank's shard (its shape [s]), so no rank holds the whole model in host
// memory. Otherwise (another number of shards, another stage): the whole
// tensors, as above.
Result<checkpoint::Checkpoint> read_checkpoint_shard(
    const std::string& dir, int rank, int world, const std::map<std::string, std::vector<int64_t>>& sharded);

}  // namespace tandem::host::train
