// Pipeline parallelism's whole checkpoint (--checkpoint-format whole): the
// first rank of each stage sends the tensors its stage holds, made whole
// (ZeRO's shards and tensor-parallel slices gathered), to the first stage,
// whose rank 0 writes the one file. No other rank ever holds another
// stage's tensors. A header message (each tensor's name, dtype, shape and
// size) goes first, then each tensor's bytes as they lie, so nothing is
// copied into one buffer on either side.
#pragma once

#include "checkpoint/safetensors.hpp"
#include "exec/stage_link.hpp"

namespace tandem::host::train {

Result<void> send_stage_tensors(exec::StageLink& link, const checkpoint::Checkpoint& cp, int to);
// Appends what stage `from` sent to `cp`'s tensors.
Result<void> receive_stage_tensors(exec::StageLink& link, checkpoint::Checkpoint& cp, int from);

}  // namespace tandem::host::train
