#include "train/run_ranks.hpp"

#include "util/logger.hpp"

namespace tandem::host::train {
namespace {

// Each kind of group has rendezvous files of its own (a file rendezvous:
// rendezvous.hpp adds the group's number): "/path.tensor.group-1".
CommOptions for_groups(CommOptions options, const std::string& kind) {
  if (options.rendezvous.rfind("file://", 0) == 0) options.rendezvous += "." + kind;
  return options;
}

}  // namespace

Result<RunRanks> RunRanks::connect(const PluginRegistry& registry, const DeviceHandle& device,
                                   const program::ProcessGroup& group, const program::ParallelLayout& layout,
                                   const CommOptions& options) {
  RunRanks r;
  if (group.world == 1) return r;
  // With every rank a stage of its own, the stages' messages go over the
  // communicator of all ranks: its plugin is told so.
  CommOptions over_all = options;
  over_all.point_to_point = layout.pipeline > 1 && layout.pipeline == group.world;
  auto all = GradientCommunicator::create(registry, device, group, over_all);
  if (!all) return all.error();
  r.all_ = std::move(*all);
  // Every rank joins its groups in the same order: its tensor-parallel
  // group, the ranks across the groups that hold the same slices of the same
  // stage, the stages of its pipeline. A group that would be every rank is
  // the communicator over all.
  if (layout.tensor > 1 && layout.tensor < group.world) {
    auto tensor = GradientCommunicator::create(registry, device, layout.tensor_group(group),
                                               for_groups(options, "tensor"), layout.tensor_group_index());
    if (!tensor) return tensor.error();
    r.tensor_ = std::move(*tensor);
  }
  if (layout.data > 1 && layout.data < group.world) {
    auto data = GradientCommunicator::create(registry, device, layout.data_group(group),
                                             for_groups(options, "data"), layout.data_group_index());
    if (!data) return data.error();
    r.data_ = std::move(*data);
  }
  if (layout.pipeline > 1)
    if (auto joined = r.join_stages(registry, device, group, layout, options); !joined) return joined.error();
  return r;
}

// The stages exchange their messages through the run's comm plugin where
// it sends point to point on the rank's device's memory: host memory (mpi),
// or a GPU's with started transfers (nccl), whose messages stay on the
// device (exec/message_buffers.hpp). Otherwise through mpi on host memory
// beside it (a plugin of collectives only, or one whose point to point on
// a device's memory is only the blocking send and recv).
Result<void> RunRanks::join_stages(const PluginRegistry& registry, const DeviceHandle& device,
                                   const program::ProcessGroup& group, const program::ParallelLayout& layout,
                                   const CommOptions& options) {
  auto info = device.info();
  if (!info) return info.error();
  const bool whole = layout.pipeline == group.world;
  const program::ProcessGroup stages = whole ? group : layout.pipeline_group(group);
  const std::optional<int32_t> part =
      whole ? std::nullopt : std::optional<int32_t>(layout.pipeline_group_index());
  const LoadedPlugin& plugin = all_->plugin();
  if (info->host_addressable ? all_->has_point_to_point() : starts_transfers(plugin)) {
    if (!info->host_addressable && group.rank == 0)
      log_info("pipeline stages exchange activations on " + device.id() + "'s memory through comm plugin '" +
               plugin.name + "'");
    stages_are_all_ = whole;
    if (whole) return {};
    auto link =
        GradientCommunicator::create(registry, device, stages, for_groups(options, "stages"), part, true);
    if (!link) return link.error();
    pipeline_ = std::move(*link);
    return {};
  }
  const std::string why = info->host_addressable || !all_->has_point_to_point()
                              ? "comm plugin '" + plugin.name + "' does not send point to point"
                              : "comm plugin '" + plugin.name + "' sends " + device.id() +
                                    "'s memory only with the blocking send and recv of ABI 1.15, not the "
                                    "started transfers of 1.16";
  CommOptions on_host = options;
  on_host.plugin = "mpi";
  auto link = GradientCommunicator::create_on_host(registry, stages, on_host, part);
  if (!link)
    return make_error("pipeline parallelism: " + why +
                          ", so the stages would exchange activations through mpi, but " +
                          link.error().message,
                      link.error().status);
  if (group.rank == 0) log_info("pipeline stages exchange activations through mpi: " + why);
  pipeline_ = std::move(*link);
  return {};
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
