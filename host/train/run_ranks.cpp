#include "train/run_ranks.hpp"

namespace tandem::host::train {

Result<RunRanks> RunRanks::connect(const PluginRegistry& registry, const DeviceHandle& device,
                                   const program::ProcessGroup& group, const program::ParallelLayout& layout,
                                   const CommOptions& options) {
  RunRanks r;
  if (group.world == 1) return r;
  if (layout.tensor > 1 || layout.pipeline > 1) {
    auto info = device.info();
    if (!info) return info.error();
    // Checkpoints gather the slices in host memory; stages send host memory.
    if (!info->host_addressable)
      return make_error(std::string(layout.tensor > 1 ? "tensor" : "pipeline") + " parallelism on " +
                            device.id() + " is not supported yet: it runs on CPU devices (--device cpu)",
                        TDM_UNSUPPORTED);
  }
  const bool pipelined = layout.pipeline > 1;
  auto all = GradientCommunicator::create(registry, device, group, options, std::nullopt,
                                          pipelined && layout.pipeline == group.world);
  if (!all) return all.error();
  r.all_ = std::move(*all);
  r.stages_are_all_ = pipelined && layout.pipeline == group.world;
  // Every rank joins its groups in the same order: its tensor-parallel
  // group, the ranks across the groups that hold the same slices of the same
  // stage, the stages of its pipeline. A group that would be every rank is
  // the communicator over all.
  if (layout.tensor > 1 && layout.tensor < group.world) {
    auto tensor = GradientCommunicator::create(registry, device, layout.tensor_group(group), options,
                                               layout.tensor_group_index());
    if (!tensor) return tensor.error();
    r.tensor_ = std::move(*tensor);
  }
  if (layout.data > 1 && layout.data < group.world) {
    auto data = GradientCommunicator::create(registry, device, layout.data_group(group), options,
                                             layout.data_group_index());
    if (!data) return data.error();
    r.data_ = std::move(*data);
  }
  if (pipelined && layout.pipeline < group.world) {
    auto stages = GradientCommunicator::create(registry, device, layout.pipeline_group(group), options,
                                               layout.pipeline_group_index(), true);
    if (!stages) return stages.error();
    r.pipeline_ = std::move(*stages);
  }
  return r;
}

void RunRanks::give_to(exec::ExecutorOptions& options, const program::Program& program) const {
  if (alone()) return;
  if (program.layout().tensor > 1) options.collectives = &tensor();
  if (program.model().zero.active()) options.data_collectives = &data();
  if (program.layout().pipeline > 1) options.stage_link = pipeline();
}

RunCheckpoints::Ranks RunRanks::for_checkpoints() const {
  if (alone()) return {};
  return {all_.get(), &tensor(), &data(), pipeline()};
}

}  // namespace tandem::host::train
