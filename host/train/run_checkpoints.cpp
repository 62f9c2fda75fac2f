#include "train/run_checkpoints.hpp"

#include <algorithm>
#include <utility>

#include "exec/rank_pipeline.hpp"
#include "exec/tensor_text.hpp"
#include "train/checkpointing.hpp"
#include "train/sharded_checkpoint.hpp"
#include "train/stage_tensors.hpp"
#include "train/tensor_shards.hpp"

namespace tandem::host::train {

RunCheckpoints::RunCheckpoints(const model::ModelSpec& spec, const DeviceHandle& device,
                               const PluginRegistry& registry, program::Program& program, std::string run_dir,
                               std::string format, Ranks ranks)
    : spec_(&spec),
      device_(&device),
      registry_(&registry),
      program_(&program),
      run_dir_(std::move(run_dir)),
      format_(std::move(format)),
      ranks_(ranks),
      slices_(tensor_shards(program.model())),
      shards_(zero_states(program.model())) {}

std::map<std::string, std::string> RunCheckpoints::metadata(int64_t step, int64_t epoch, int64_t next_batch,
                                                            int64_t total_steps) const {
  std::string plugins;
  for (const LoadedPlugin* p : registry_->plugins())
    plugins += (plugins.empty() ? "" : ",") + p->name + "=" + p->version;
  std::map<std::string, std::string> meta = {
      {"format", "pt"},  // what safetensors tools expect for a state dict
      {"tandem.model_file", spec_->path},
      {"tandem.model_hash", spec_->source_hash},
      {"tandem.step", std::to_string(step)},
      {"tandem.epoch", std::to_string(epoch)},
      {"tandem.next_batch", std::to_string(next_batch)},
      {"tandem.total_steps", std::to_string(total_steps)},
      {"tandem.seed", std::to_string(spec_->train.seed)},
      {"tandem.device", device_->id()},
      {"tandem.plugins", plugins},
      {"tandem.world_size", std::to_string(program_->data_world())}};
  if (ranks_.all != nullptr)  // the comm plugin the ranks ran through (--comm)
    meta["tandem.comm"] = ranks_.all->plugin().name + "=" + ranks_.all->plugin().version;
  return meta;
}

Result<std::string> RunCheckpoints::save(int64_t step, int64_t epoch, int64_t next_batch,
                                         int64_t total_steps) {
  // ZeRO alone: each rank writes its shards (unless asked for one file).
  const bool sharded = !shards_.empty() && format_ == "sharded" && slices_.empty();
  // Otherwise rank 0 writes for everyone: data-parallel ranks hold
  // identical weights, tensor-parallel ones first gather their slices into
  // whole tensors (the ranks of rank 0's group; the other groups hold the
  // same), and with ZeRO every rank first gathers its shards.
  const int rank = program_->group().rank;
  if (program_->layout().pipeline > 1)
    return format_ == "sharded" ? save_stages(metadata(step, epoch, next_batch, total_steps), step)
                                : save_stages_whole(metadata(step, epoch, next_batch, total_steps), step);
  if (!sharded && !gathers()) return std::string();
  auto cp = collect_tensors(program_->model().graph, program_->executor(),
                            metadata(step, epoch, next_batch, total_steps));
  if (!cp) return cp.error();
  if (sharded) return save_shards(std::move(*cp), step);
  if (auto r = make_whole(*cp); !r) return r.error();
  if (rank != 0) return std::string();
  return save_checkpoint(run_dir_, step, *cp, spec_->train.keep_checkpoints);
}

bool RunCheckpoints::gathers() const {
  // A pipeline's stages each hold their layers: every rank reads them (the
  // holder broadcasts), so rank 0 gets whole tensors.
  return program_->group().rank == 0 || (!slices_.empty() && program_->data_rank() == 0) ||
         !shards_.empty() || program_->layout().pipeline > 1;
}

Result<void> RunCheckpoints::make_whole(checkpoint::Checkpoint& cp) {
  if (ranks_.all == nullptr || !gathers()) return {};
  // ZeRO's shards into this rank's tensor-parallel slices, then the slices
  // into whole tensors.
  if (auto r = gather_shards(cp); !r) return r;
  return gather_slices(cp);
}

Result<std::string> RunCheckpoints::save_shards(checkpoint::Checkpoint cp, int64_t step) {
  const int rank = program_->data_rank();
  if (rank != 0)  // rank 0 writes what every rank holds whole
    std::erase_if(cp.tensors,
                  [this](const checkpoint::TensorRecord& t) { return shards_.count(t.name) == 0; });
  return publish_shards(
      write_checkpoint_shard(run_dir_, step, rank, program_->data_world(), std::move(cp), shards_), step);
}

Result<checkpoint::Checkpoint> RunCheckpoints::collect_stage(std::map<std::string, std::string> meta) {
  exec::RankPipelineExecutor& pipeline = *program_->rank_pipeline();
  const TensorReader read = [&pipeline](ValueId value, void* host, size_t bytes) -> Result<bool> {
    if (!pipeline.holds(value)) return false;
    if (auto r = pipeline.read_held(value, host, bytes); !r) return r.error();
    return true;
  };
  auto cp = collect_tensors(program_->model().graph, read, std::move(meta));
  if (!cp) return cp.error();
  if (auto r = gather_shards(*cp); !r) return r.error();
  if (auto r = gather_slices(*cp); !r) return r.error();
  return cp;
}

// Pipeline parallelism: one rank of each stage writes the tensors its stage
// holds (ZeRO's shards and tensor-parallel slices gathered first); no stage
// reads another's.
Result<std::string> RunCheckpoints::save_stages(std::map<std::string, std::string> meta, int64_t step) {
  auto cp = collect_stage(std::move(meta));
  if (!cp) return cp.error();
  if (program_->data_rank() != 0 || program_->model().tensor_parallel.rank != 0)
    return publish_shards({}, step);  // the stage's first rank writes it
  return publish_shards(write_stage_checkpoint_shard(run_dir_, step, program_->rank_pipeline()->stage(),
                                                     program_->layout().pipeline, std::move(*cp)),
                        step);
}

// One file: each stage's first rank sends its stage's tensors to rank 0
// (stage_tensors.hpp), which writes them with its own.
Result<std::string> RunCheckpoints::save_stages_whole(std::map<std::string, std::string> meta, int64_t step) {
  auto cp = collect_stage(std::move(meta));
  if (!cp) return cp.error();
  if (program_->data_rank() != 0 || program_->model().tensor_parallel.rank != 0) return std::string();
  exec::StageLink& stages = *ranks_.stages;
  if (stages.stage() != 0) {
    if (auto r = send_stage_tensors(stages, *cp, 0); !r) return r.error();
    return std::string();
  }
  for (int from = 1; from < int(program_->layout().pipeline); ++from)
    if (auto r = receive_stage_tensors(stages, *cp, from); !r) return r.error();
  return save_checkpoint(run_dir_, step, *cp, spec_->train.keep_checkpoints);
}

// Every rank learns whether every file was written before rank 0 makes the
// checkpoint visible.
Result<std::string> RunCheckpoints::publish_shards(const Result<void>& wrote, int64_t step) {
  auto failed = ranks_.all->max(wrote ? 0 : 1);
  if (!failed) return failed.error();
  if (!wrote) return wrote.error();
  if (*failed != 0)
    return make_error("another rank could not write its shard of the checkpoint of step " +
                          std::to_string(step) + " (its error says why); earlier checkpoints are intact",
                      TDM_INVALID_ARGUMENT);
  if (program_->group().rank != 0) return std::string();
  return publish_checkpoint_shards(run_dir_, step, spec_->train.keep_checkpoints);
}

namespace {

// Each tensor `whole_of` names: every rank's part all-gathered over `ranks`,
// then made whole by `assemble(t, parts, whole, element)`.
template <class Whole, class Assemble>
Result<void> gather(checkpoint::Checkpoint& cp, const std::map<std::string, Whole>& whole_of,
                    GradientCommunicator& ranks, Assemble assemble) {
  for (checkpoint::TensorRecord& t : cp.tensors) {
    auto whole = whole_of.find(t.name);
    if (whole == whole_of.end()) continue;
    const size_t element = exec::dtype_size(t.dtype);
    std::vector<std::byte> parts(t.data.size() * static_cast<size_t>(ranks.world()));
    if (auto r = ranks.all_gather_host(t.data.data(), parts.data(), t.data.size() / element, t.dtype); !r)
      return r;
    assemble(t, parts, whole->second, element);
  }
  return {};
}

}  // namespace

Result<void> RunCheckpoints::gather_shards(checkpoint::Checkpoint& cp) {
  return gather(cp, shards_, *ranks_.data,
                [](checkpoint::TensorRecord& t, const std::vector<std::byte>& parts,
                   const std::vector<int64_t>& whole, size_t element) {
                  t.data = zero_assemble(parts, whole, element);
                  t.shape = whole;
                });
}

Result<void> RunCheckpoints::gather_slices(checkpoint::Checkpoint& cp) {
  return gather(cp, slices_, *ranks_.tensor,
                [](checkpoint::TensorRecord& t, const std::vector<std::byte>& parts,
                   const lowering::Shard& slice, size_t element) {
                  t.data = assemble(parts, slice, static_cast<int>(parts.size() / t.data.size()), element);
                  t.shape = slice.full;
                });
}

Result<checkpoint::Checkpoint> RunCheckpoints::load(const std::string& file) const {
  auto cp = is_sharded_checkpoint(file) && slices_.empty()
                ? read_checkpoint_shard(file, program_->data_rank(), program_->data_world(), shards_)
                : read_checkpoint(file);
  if (!cp) return cp.error();
  const lowering::TensorParallel& tp = program_->model().tensor_parallel;
  if (auto r = slice_checkpoint(*cp, slices_, tp.rank, tp.size, file); !r) return r.error();
  if (auto r = zero_slice_checkpoint(*cp, shards_, program_->data_rank(), program_->data_world(), file); !r)
    return r.error();
  return cp;
}

}  // namespace tandem::host::train
