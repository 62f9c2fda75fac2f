#include "train/distributed.hpp"

#include <cstdlib>

#include "exec/tensor_text.hpp"
#include "train/collective_watchdog.hpp"
#include "train/rendezvous.hpp"
#include "train/staged_gather.hpp"
#include "util/last_error.hpp"

namespace tandem::host::train {
namespace {

// "comm plugin 'tcp' (/usr/lib/…/libtandem-tcp.so)", for messages.
std::string comm_plugin_text(const LoadedPlugin& plugin) {
  return "comm plugin '" + plugin.name + "' (" + plugin.path.string() + ")";
}

// The comm plugin named `chosen` ([train] comm, --comm), or `by_default`
// for the device's memory.
Result<const LoadedPlugin*> comm_plugin_for(const PluginRegistry& registry, const std::string& chosen,
                                            const std::string& by_default, const ProcessGroup& group,
                                            const std::string& device) {
  const std::string name = chosen.empty() ? by_default : chosen;
  const LoadedPlugin* plugin = registry.find(name);
  const std::string place = "this process is rank " + std::to_string(group.rank) + " of " +
                            std::to_string(group.world) +
                            (group.launcher.empty() ? "" : " (" + group.launcher + ")") + " on " + device;
  if (plugin == nullptr)
    return make_error(
        place + ", but no comm plugin named '" + name + "' was loaded" +
            (chosen.empty() ? " (the default for this device's memory): install tandem-plugin-" + name +
                                  ", or choose one with --comm"
                            : " (--comm / [train] comm): see 'tandem plugins -v' for the comm "
                              "plugins found, or add its directory with --plugin-path"),
        TDM_NOT_FOUND);
  if (plugin->kind != TDM_PLUGIN_COMM || plugin->comm == nullptr)
    return make_error(
        place + ": '" + name + "' (" + plugin->path.string() +
            ") is not a comm plugin; --comm names one of the comm plugins 'tandem plugins' lists",
        TDM_INVALID_ARGUMENT);
  return plugin;
}

}  // namespace

// "rank 1: allreduce of 4096 f32 in comm plugin 'tcp' (/path)".
std::string describe_call(int rank, const char* what, size_t count, tdm_dtype dtype,
                          const LoadedPlugin& plugin) {
  return "rank " + std::to_string(rank) + ": " + what + " of " + std::to_string(count) + " " +
         exec::dtype_name(dtype) + " in " + comm_plugin_text(plugin);
}

// ABI 1.16's send_start, recv_start and request_test, all three.
bool starts_transfers(const LoadedPlugin& p) {
  const tdm_comm_api& api = *p.comm;
  return p.abi_minor_effective >= 16 && TDM_STRUCT_HAS(&api, tdm_comm_api, request_test) &&
         api.send_start != nullptr && api.recv_start != nullptr && api.request_test != nullptr;
}

// ABI 1.15's blocking send and recv.
bool has_send_and_recv(const LoadedPlugin& p) {
  return p.abi_minor_effective >= 15 && p.comm->send != nullptr && p.comm->recv != nullptr;
}

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
  if (threaded_ && !threaded_->idle()) {
    // A thread still waits in the plugin on a peer that may never come: it,
    // and the communicator it uses, are left to process exit.
    (void)threaded_.release();
    return;
  }
  threaded_.reset();
  if (comm_ != nullptr) plugin_.comm->comm_destroy(comm_);
  if (device_ != nullptr) {
    const tdm_backend_api& api = *device_->backend().backend;
    if (scratch_ != nullptr) api.mem_free(device_->get(), scratch_);
    if (stream_ != nullptr) api.stream_destroy(stream_);
  }
}

Result<tdm_comm*> GradientCommunicator::create_with_id(const LoadedPlugin& plugin,
                                                       const PluginRegistry& registry,
                                                       const ProcessGroup& group, int32_t device,
                                                       const CommOptions& options,
                                                       std::optional<int32_t> part) {
  const std::string who = comm_plugin_text(plugin);
  std::vector<unsigned char> id;
  if (group.rank == 0) {
    size_t bytes = 4096;
    id.resize(bytes);
    tdm_status made;
    {
      const WatchedCall watched([&] { return "rank 0: comm_unique_id of " + who; }, options.timeout_seconds);
      made = plugin.comm->comm_unique_id(id.data(), &bytes);
    }
    if (made != TDM_OK)
      return make_error("joining the ranks: " + who +
                            " could not make a rendezvous id: " + last_error_text(silent_failure(made)),
                        TDM_UNAVAILABLE);
    id.resize(bytes);
  }
  if (auto r = rendezvous(options.rendezvous, registry, group, id, options.timeout_seconds, part); !r)
    return r.error();
  tdm_comm_init_info init = comm_init_info(group, options.timeout_seconds, device);
  init.point_to_point = options.point_to_point ? 1 : 0;
  init.unique_id = id.data();
  init.unique_id_bytes = id.size();
  tdm_comm* comm = nullptr;
  tdm_status created;
  {
    const WatchedCall watched(
        [&] { return "rank " + std::to_string(group.rank) + ": comm_create of " + who; },
        options.timeout_seconds);
    created = plugin.comm->comm_create(&init, &comm);
  }
  if (created != TDM_OK || comm == nullptr)
    return make_error("joining the " + std::to_string(group.world) + " ranks through " + who + ": " +
                          last_error_text(silent_failure(created)),
                      TDM_UNAVAILABLE);
  return comm;
}

Result<void> GradientCommunicator::stage_on_device(const DeviceHandle& device) {
  const tdm_backend_api& api = *device.backend().backend;
  device_ = &device;
  if (api.stream_create(device.get(), &stream_) != TDM_OK ||
      api.mem_alloc(device.get(), kScratchBytes, &scratch_) != TDM_OK)
    return make_error("data parallelism on " + device.id() +
                          ": no stream or scratch memory: " + last_error_text("the backend gave no reason"),
                      TDM_OUT_OF_MEMORY);
  return {};
}

std::string GradientCommunicator::describe(const char* what, size_t count, tdm_dtype dtype) const {
  return describe_call(group_.rank, what, count, dtype, plugin_);
}

Error GradientCommunicator::failure(const char* what, tdm_status status) const {
  return make_error(std::string(what) + " failed: " + last_error_text("the comm plugin gave no reason"),
                    status);
}

Result<std::unique_ptr<GradientCommunicator>> GradientCommunicator::create(
    const PluginRegistry& registry, const DeviceHandle& device, const ProcessGroup& group,
    const CommOptions& options, std::optional<int32_t> part, bool point_to_point) {
  auto info = device.info();
  if (!info) return info.error();
  const bool gpu = info->kind == TDM_DEVICE_GPU;
  auto plugin = comm_plugin_for(registry, options.plugin, gpu ? "nccl" : "mpi", group, device.id());
  if (!plugin) return plugin.error();
  const int32_t device_index = info->host_addressable ? -1 : int32_t(device.index());
  auto c = join(**plugin, registry, group, options, part, point_to_point, device_index);
  if (!c) return c.error();
  if (!info->host_addressable)
    if (auto r = (*c)->stage_on_device(device); !r) return r.error();
  return c;
}

Result<std::unique_ptr<GradientCommunicator>> GradientCommunicator::create_on_host(
    const PluginRegistry& registry, const ProcessGroup& group, const CommOptions& options,
    std::optional<int32_t> part) {
  auto plugin = comm_plugin_for(registry, options.plugin, "mpi", group, "host memory");
  if (!plugin) return plugin.error();
  return join(**plugin, registry, group, options, part, true, -1);
}

bool GradientCommunicator::has_point_to_point() const {
  return starts_transfers(plugin_) || has_send_and_recv(plugin_);
}

Result<std::unique_ptr<GradientCommunicator>> GradientCommunicator::join(
    const LoadedPlugin& p, const PluginRegistry& registry, const ProcessGroup& group,
    const CommOptions& options, std::optional<int32_t> part, bool point_to_point, int32_t device_index) {
  if (point_to_point && !starts_transfers(p) && !has_send_and_recv(p))
    return make_error(
        "[train] pipeline_parallel sends activations between ranks with a comm plugin's send_start, "
        "recv_start and request_test (ABI 1.16) or its send and recv (ABI 1.15), which " +
            comm_plugin_text(p) + " does not have: use --comm mpi",
        TDM_UNSUPPORTED);
  CommOptions told = options;
  told.point_to_point = options.point_to_point || point_to_point;
  tdm_comm* comm = nullptr;
  if (p.comm->comm_unique_id != nullptr) {
    // Each group gets its own rank 0's id (rendezvous.hpp).
    auto made = create_with_id(p, registry, group, device_index, told, part);
    if (!made) return made.error();
    comm = *made;
  } else {
    tdm_comm_init_info init = comm_init_info(group, options.timeout_seconds, device_index);
    init.point_to_point = told.point_to_point ? 1 : 0;
    if (part) {
      if (p.abi_minor_effective < 10)
        return make_error(
            "data and tensor parallelism together need a comm plugin of ABI 1.10 or newer to "
            "form groups of ranks; " +
                comm_plugin_text(p) + " speaks ABI 1." + std::to_string(p.abi_minor_effective) +
                ": update it",
            TDM_UNSUPPORTED);
      init.group = *part;
    }
    tdm_status created;
    {
      const WatchedCall watched(
          [&] { return "rank " + std::to_string(group.rank) + ": comm_create of " + comm_plugin_text(p); },
          options.timeout_seconds);
      created = p.comm->comm_create(&init, &comm);
    }
    if (created != TDM_OK || comm == nullptr)
      return make_error("joining the " + std::to_string(group.world) + " ranks through " +
                            comm_plugin_text(p) + ": " + last_error_text(silent_failure(created)),
                        TDM_UNAVAILABLE);
  }
  return std::unique_ptr<GradientCommunicator>(
      new GradientCommunicator(p, comm, group, options.timeout_seconds));
}

Result<void> GradientCommunicator::average(void* buffer, size_t count, tdm_dtype dtype, void* stream) {
  const tdm_status s = watched("allreduce", count, dtype, [&] {
    return plugin_.comm->allreduce(comm_, buffer, buffer, count, dtype, TDM_REDUCE_AVG, stream);
  });
  if (s != TDM_OK) return failure("data parallelism: averaging gradients", s);
  return {};
}

Result<int32_t> GradientCommunicator::max(int32_t value) {
  int32_t out = value;
  const auto reduce = [&](void* buffer) {
    return watched("allreduce", 1, TDM_S32, [&] {
      return plugin_.comm->allreduce(comm_, buffer, buffer, 1, TDM_S32, TDM_REDUCE_MAX, nullptr);
    });
  };
  if (auto r = on_host_bytes(&out, sizeof out, "agreeing on stopping", reduce); !r) return r.error();
  return out;
}

Result<void> GradientCommunicator::all_reduce_sum(void* buffer, size_t count, tdm_dtype dtype, void* stream) {
  const tdm_status s = watched("allreduce", count, dtype, [&] {
    return plugin_.comm->allreduce(comm_, buffer, buffer, count, dtype, TDM_REDUCE_SUM, stream);
  });
  if (s != TDM_OK) return failure("summing over ranks", s);
  return {};
}

Result<void> GradientCommunicator::all_gather(const void* send, void* receive, size_t send_count,
                                              tdm_dtype dtype, void* stream) {
  const tdm_status s = watched("allgather", send_count, dtype, [&] {
    return plugin_.comm->allgather(comm_, send, receive, send_count, dtype, stream);
  });
  if (s != TDM_OK) return failure("gathering from ranks", s);
  return {};
}

Result<void> GradientCommunicator::all_gather_host(const void* send, void* receive, size_t send_count,
                                                   tdm_dtype dtype) {
  if (device_ == nullptr) return all_gather(send, receive, send_count, dtype, nullptr);
  const size_t element = exec::dtype_size(dtype);
  const size_t bytes = send_count * element;
  if (bytes == 0) return {};
  const size_t piece = staging_piece(bytes, kStagingBytes, element);
  const tdm_backend_api& api = *device_->backend().backend;
  const size_t buffer_bytes = piece * (size_t(group_.world) + 1);
  void* buffer = nullptr;
  if (api.mem_alloc(device_->get(), buffer_bytes, &buffer) != TDM_OK)
    return make_error("gathering host bytes from ranks: no device memory for " +
                          std::to_string(buffer_bytes) + " bytes on " + device_->id(),
                      TDM_OUT_OF_MEMORY);
  const char* what = "gathering host bytes from ranks";
  const StagingCalls calls{
      [&](void* device, const void* host, size_t n) { return device_copy(true, device, host, n, what); },
      [&](void* host, const void* device, size_t n) { return device_copy(false, host, device, n, what); },
      [&](const void* from, void* into, size_t n) {
        return all_gather(from, into, n / element, dtype, nullptr);
      },
  };
  auto done = gather_in_pieces(send, receive, bytes, group_.world, element, buffer, piece, calls);
  api.mem_free(device_->get(), buffer);
  return done;
}

Result<void> GradientCommunicator::reduce_scatter_mean(const void* send, void* receive, size_t receive_count,
                                                       tdm_dtype dtype, void* stream) {
  const tdm_status s = watched("reduce_scatter", receive_count, dtype, [&] {
    return plugin_.comm->reduce_scatter(comm_, send, receive, receive_count, dtype, TDM_REDUCE_AVG, stream);
  });
  if (s != TDM_OK) return failure("ZeRO: averaging gradient shards over ranks", s);
  return {};
}

// A GPU communicator reads device memory: the host's bytes go through the
// device's scratch (a buffer of their size where they do not fit it).
Result<void> GradientCommunicator::on_host_bytes(void* data, size_t bytes, const std::string& what,
                                                 const std::function<tdm_status(void*)>& call) {
  if (device_ == nullptr) {
    const tdm_status s = call(data);
    return s == TDM_OK ? Result<void>{} : failure(what.c_str(), s);
  }
  const tdm_backend_api& api = *device_->backend().backend;
  void* buffer = scratch_;
  if (bytes > kScratchBytes && api.mem_alloc(device_->get(), bytes, &buffer) != TDM_OK)
    return make_error(what + ": no device memory for " + std::to_string(bytes) + " bytes on " + device_->id(),
                      TDM_OUT_OF_MEMORY);
  Result<void> done = device_copy(true, buffer, data, bytes, (what + " (staging)").c_str());
  if (done) {
    if (const tdm_status s = call(buffer); s != TDM_OK) done = failure(what.c_str(), s);
  }
  if (done) done = device_copy(false, data, buffer, bytes, (what + " (reading back)").c_str());
  if (buffer != scratch_) api.mem_free(device_->get(), buffer);
  return done;
}

Result<void> GradientCommunicator::device_copy(bool to_device, void* into, const void* from, size_t bytes,
                                               const char* what) {
  const tdm_backend_api& api = *device_->backend().backend;
  clear_last_error();
  tdm_status s =
      to_device ? api.copy_h2d(stream_, into, from, bytes) : api.copy_d2h(stream_, into, from, bytes);
  if (s == TDM_OK) s = api.stream_synchronize(stream_);
  if (s == TDM_OK) return {};
  return make_error(std::string(what) + ": copying " + std::to_string(bytes) + " bytes " +
                        (to_device ? "to " : "from ") + device_->id() +
                        " failed: " + last_error_text("the backend gave no reason"),
                    s);
}

}  // namespace tandem::host::train
