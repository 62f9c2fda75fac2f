#include "train/run_ranks.hpp"

namespace tandem::host::train {

Result<RunRanks> RunRanks::connect(const PluginRegistry& registry, const DeviceHandle& device,
                                   const program::Program& program, const CommOptions& options) {
  RunRanks r;
  const program::ProcessGroup& group = program.group();
  if (group.world == 1) return r;
  const program::ParallelLayout& layout = program.layout();
  if (layout.tensor > 1) {
    auto info = device.info();
    if (!info) return info.error();
    // Checkpoints gather the slices in host memory.
    if (!info->host_addressable)
      return make_error("tensor parallelism on " + device.id() +
                            " is not supported yet: it runs on CPU devices (--device cpu)",
                        TDM_UNSUPPORTED);
  }
  auto all = GradientCommunicator::create(registry, device, group, options);
  if (!all) return all.error();
  r.all_ = std::move(*all);
  if (layout.tensor > 1 && layout.data > 1) {
    // Every rank joins its tensor-parallel group, then the ranks across the
    // groups that hold the same slices; in the same order on every rank.
    auto tensor =
        GradientCommunicator::create(registry, device, layout.tensor_group(group), options, layout.data_rank);
    if (!tensor) return tensor.error();
    r.tensor_ = std::move(*tensor);
    auto data =
        GradientCommunicator::create(registry, device, layout.data_group(group), options, layout.tensor_rank);
    if (!data) return data.error();
    r.data_ = std::move(*data);
  }
  return r;
}

void RunRanks::give_to(exec::ExecutorOptions& options, const program::Program& program) const {
  if (alone()) return;
  if (program.layout().tensor > 1) options.collectives = &tensor();
  if (program.model().zero.active()) options.data_collectives = &data();
}

RunCheckpoints::Ranks RunRanks::for_checkpoints() const {
  if (alone()) return {};
  return {all_.get(), &tensor(), &data()};
}

}  // namespace tandem::host::train
