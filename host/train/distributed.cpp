#include "train/distributed.hpp"

#include <cstdlib>

#include "train/rendezvous.hpp"
#include "util/last_error.hpp"

namespace tandem::host::train {
tdm_comm_init_info comm_init_info(const ProcessGroup& group, double timeout_seconds, int32_t device) {
  tdm_comm_init_info init{};
  init.struct_size = sizeof init;
  init.rank = group.rank;
  init.world_size = group.world;
  init.local_rank = group.local_rank;
  init.timeout_seconds = timeout_seconds;
  init.device = device;
  return init;
}

GradientCommunicator::~GradientCommunicator() {
  if (comm_ != nullptr) plugin_.comm->comm_destroy(comm_);
  if (device_ != nullptr) {
    const tdm_backend_api& api = *device_->backend().backend;
    if (scratch_ != nullptr) api.mem_free(device_->get(), scratch_);
    if (stream_ != nullptr) api.stream_destroy(stream_);
  }
}

Result<tdm_comm*> GradientCommunicator::create_on_gpu(const LoadedPlugin& nccl,
                                                      const PluginRegistry& registry,
                                                      const ProcessGroup& group, const DeviceHandle& device,
                                                      double timeout_seconds, const std::string& how) {
  std::vector<unsigned char> id;
  if (group.rank == 0) {
    if (nccl.comm->comm_unique_id == nullptr)
      return make_error("the nccl plugin has no comm_unique_id", TDM_INTERNAL);
    size_t bytes = 4096;
    id.resize(bytes);
    if (nccl.comm->comm_unique_id(id.data(), &bytes) != TDM_OK)
      return make_error("data parallelism on GPUs: " + last_error_text("the nccl plugin gave no reason"),
                        TDM_UNAVAILABLE);
    id.resize(bytes);
  }
  if (auto r = rendezvous(how, registry, group, id, timeout_seconds); !r) return r.error();
  // The communicator goes on the GPU the rank's training runs on.
  tdm_comm_init_info init = comm_init_info(group, timeout_seconds, int32_t(device.index()));
  init.unique_id = id.data();
  init.unique_id_bytes = id.size();
  tdm_comm* comm = nullptr;
  if (nccl.comm->comm_create(&init, &comm) != TDM_OK || comm == nullptr)
    return make_error("data parallelism on GPUs: could not join the " + std::to_string(group.world) +
                          " ranks: " + last_error_text("the nccl plugin gave no reason"),
                      TDM_UNAVAILABLE);
  return comm;
}

Result<void> GradientCommunicator::stage_on_device(const DeviceHandle& device) {
  const tdm_backend_api& api = *device.backend().backend;
  device_ = &device;
  if (api.stream_create(device.get(), &stream_) != TDM_OK ||
      api.mem_alloc(device.get(), 64, &scratch_) != TDM_OK)
    return make_error("data parallelism on " + device.id() +
                          ": no stream or scratch memory: " + last_error_text("the backend gave no reason"),
                      TDM_OUT_OF_MEMORY);
  return {};
}

Error GradientCommunicator::failure(const char* what, tdm_status status) const {
  return make_error(std::string(what) + " failed: " + last_error_text("the comm plugin gave no reason"),
                    status);
}

Result<std::unique_ptr<GradientCommunicator>> GradientCommunicator::create(
    const PluginRegistry& registry, const DeviceHandle& device, const ProcessGroup& group,
    double timeout_seconds, const std::string& rendezvous, std::optional<int32_t> part) {
  auto info = device.info();
  if (!info) return info.error();
  if (part && !info->host_addressable)
    return make_error("groups of ranks (data and tensor parallelism together) on " + device.id() +
                          " are not supported yet: they run on CPU devices (--device cpu)",
                      TDM_UNSUPPORTED);
  if (info->kind == TDM_DEVICE_GPU) {
    const LoadedPlugin* nccl = registry.find("nccl");
    if (nccl == nullptr || nccl->comm == nullptr)
      return make_error(
          "this process is rank " + std::to_string(group.rank) + " of " + std::to_string(group.world) +
              " on " + device.id() +
              ", but no comm plugin named 'nccl' was loaded: install tandem-plugin-nccl, or see "
              "'tandem plugins -v'",
          TDM_NOT_FOUND);
    auto comm = create_on_gpu(*nccl, registry, group, device, timeout_seconds, rendezvous);
    if (!comm) return comm.error();
    std::unique_ptr<GradientCommunicator> c(new GradientCommunicator(*nccl, *comm, group));
    if (auto r = c->stage_on_device(device); !r) return r.error();
    return c;
  }
  if (!info->host_addressable)
    return make_error(
        "data parallelism: " + device.id() + " memory is not host memory, which the mpi plugin needs",
        TDM_UNSUPPORTED);
  const LoadedPlugin* plugin = registry.find("mpi");
  if (plugin == nullptr || plugin->comm == nullptr)
    return make_error("this process is rank " + std::to_string(group.rank) + " of " +
                          std::to_string(group.world) + " (" + group.launcher +
                          "), but no comm plugin named 'mpi' was loaded: install "
                          "tandem-plugin-mpi, or see 'tandem plugins -v'",
                      TDM_NOT_FOUND);
  tdm_comm_init_info init = comm_init_info(group, timeout_seconds);
  if (part) {
    if (plugin->abi_minor_effective < 10)
      return make_error(
          "data and tensor parallelism together need the mpi plugin of ABI 1.10 or newer to form "
          "groups of ranks; " +
              plugin->path.string() + " speaks ABI 1." + std::to_string(plugin->abi_minor_effective) +
              ": update tandem-plugin-mpi",
          TDM_UNSUPPORTED);
    init.group = *part;
  }
  tdm_comm* comm = nullptr;
  if (plugin->comm->comm_create(&init, &comm) != TDM_OK || comm == nullptr)
    return make_error("data parallelism: could not join the " + std::to_string(group.world) +
                          " ranks: " + last_error_text("the mpi plugin gave no reason"),
                      TDM_UNAVAILABLE);
  return std::unique_ptr<GradientCommunicator>(new GradientCommunicator(*plugin, comm, group));
}

Result<void> GradientCommunicator::average(void* buffer, size_t count, tdm_dtype dtype, void* stream) {
  const tdm_status s = plugin_.comm->allreduce(comm_, buffer, buffer, count, dtype, TDM_REDUCE_AVG, stream);
  if (s != TDM_OK) return failure("data parallelism: averaging gradients", s);
  return {};
}

Result<int32_t> GradientCommunicator::max(int32_t value) {
  if (scratch_ != nullptr) {
    const tdm_backend_api& api = *device_->backend().backend;
    int32_t out = value;
    if (api.copy_h2d(stream_, scratch_, &out, sizeof out) != TDM_OK ||
        api.stream_synchronize(stream_) != TDM_OK)
      return failure("agreeing on stopping (staging)", TDM_INTERNAL);
    const tdm_status s =
        plugin_.comm->allreduce(comm_, scratch_, scratch_, 1, TDM_S32, TDM_REDUCE_MAX, nullptr);
    if (s != TDM_OK) return failure("agreeing on stopping", s);
    if (api.copy_d2h(stream_, &out, scratch_, sizeof out) != TDM_OK ||
        api.stream_synchronize(stream_) != TDM_OK)
      return failure("agreeing on stopping (reading back)", TDM_INTERNAL);
    return out;
  }
  int32_t out = value;
  const tdm_status s = plugin_.comm->allreduce(comm_, &out, &out, 1, TDM_S32, TDM_REDUCE_MAX, nullptr);
  if (s != TDM_OK) return failure("agreeing on stopping", s);
  return out;
}

Result<void> GradientCommunicator::all_reduce_sum(void* buffer, size_t count, tdm_dtype dtype, void* stream) {
  const tdm_status s = plugin_.comm->allreduce(comm_, buffer, buffer, count, dtype, TDM_REDUCE_SUM, stream);
  if (s != TDM_OK) return failure("summing over ranks", s);
  return {};
}

Result<void> GradientCommunicator::all_gather(const void* send, void* receive, size_t send_count,
                                              tdm_dtype dtype, void* stream) {
  const tdm_status s = plugin_.comm->allgather(comm_, send, receive, send_count, dtype, stream);
  if (s != TDM_OK) return failure("gathering from ranks", s);
  return {};
}

Result<void> GradientCommunicator::reduce_scatter_mean(const void* send, void* receive, size_t receive_count,
                                                       tdm_dtype dtype, void* stream) {
  const tdm_status s =
      plugin_.comm->reduce_scatter(comm_, send, receive, receive_count, dtype, TDM_REDUCE_AVG, stream);
  if (s != TDM_OK) return failure("ZeRO: averaging gradient shards over ranks", s);
  return {};
}

}  // namespace tandem::host::train
