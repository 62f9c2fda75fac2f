// GradientCommunicator as a pipeline's stage link (exec/stage_link.hpp):
// point to point through the plugin's started transfers (ABI 1.16), or
// its blocking send and recv on threads of their own (ABI 1.15). On a
// device's memory the executor's messages are device buffers, and the
// host's bytes (a stage's checkpoint tensors) go through device buffers of
// their own.
#include "train/distributed.hpp"
#include "util/last_error.hpp"

namespace tandem::host::train {

// A transfer the plugin started (ABI 1.16): asked after with request_test.
class GradientCommunicator::PluginTransfer final : public exec::StageLink::Transfer {
 public:
  PluginTransfer(const GradientCommunicator& comm, tdm_comm_request* request, int peer)
      : comm_(comm), request_(request), peer_(peer) {}
  Result<bool> finished() override {
    if (request_ == nullptr) return true;
    int32_t done = 0;
    const tdm_status s = comm_.plugin_.comm->request_test(comm_.comm_, request_, &done);
    if (s != TDM_OK) {
      request_ = nullptr;  // released by the plugin
      return comm_.failure(("pipeline: a message with stage " + std::to_string(peer_)).c_str(), s);
    }
    if (done) request_ = nullptr;
    return done != 0;
  }

 private:
  const GradientCommunicator& comm_;
  tdm_comm_request* request_;
  int peer_;
};

ThreadedPointToPoint& GradientCommunicator::threaded() {
  if (threaded_) return *threaded_;
  // The threads' calls hold copies, not this object: a thread left waiting
  // on a dead peer outlives it (the destructor).
  const LoadedPlugin* plugin = &plugin_;
  tdm_comm* comm = comm_;
  const int rank = group_.rank;
  const double timeout = timeout_seconds_;
  auto blocking = [=](bool sending) {
    return [=](void* data, size_t bytes, int peer) -> Result<void> {
      const char* what = sending ? "send" : "recv";
      const WatchedCall watch([=] { return describe_call(rank, what, bytes, TDM_U8, *plugin); }, timeout);
      const tdm_status s = sending ? plugin->comm->send(comm, data, bytes, TDM_U8, peer, nullptr)
                                   : plugin->comm->recv(comm, data, bytes, TDM_U8, peer, nullptr);
      if (s == TDM_OK) return {};
      return make_error(std::string("pipeline: ") + (sending ? "sending to" : "receiving from") + " stage " +
                            std::to_string(peer) +
                            " failed: " + last_error_text("the comm plugin gave no reason"),
                        s);
    };
  };
  threaded_ = std::make_unique<ThreadedPointToPoint>(blocking(true), blocking(false));
  return *threaded_;
}

Result<std::unique_ptr<exec::StageLink::Transfer>> GradientCommunicator::start(bool sending, void* data,
                                                                               size_t bytes, int peer) {
  tdm_comm_request* request = nullptr;
  const tdm_status s = sending
                           ? plugin_.comm->send_start(comm_, data, bytes, TDM_U8, peer, nullptr, &request)
                           : plugin_.comm->recv_start(comm_, data, bytes, TDM_U8, peer, nullptr, &request);
  if (s != TDM_OK)
    return failure(
        ((sending ? "pipeline: sending to stage " : "pipeline: receiving from stage ") + std::to_string(peer))
            .c_str(),
        s);
  return std::unique_ptr<exec::StageLink::Transfer>(std::make_unique<PluginTransfer>(*this, request, peer));
}

Result<std::unique_ptr<exec::StageLink::Transfer>> GradientCommunicator::start_send(const void* data,
                                                                                    size_t bytes, int to) {
  if (device_ != nullptr) return staged(true, const_cast<void*>(data), bytes, to);
  if (!starts_transfers(plugin_)) return threaded().start_send(data, bytes, to);
  return start(true, const_cast<void*>(data), bytes, to);
}

Result<std::unique_ptr<exec::StageLink::Transfer>> GradientCommunicator::start_receive(void* data,
                                                                                       size_t bytes,
                                                                                       int from) {
  if (device_ != nullptr) return staged(false, data, bytes, from);
  if (!starts_transfers(plugin_)) return threaded().start_receive(data, bytes, from);
  return start(false, data, bytes, from);
}

bool GradientCommunicator::moves_device_memory() const {
  return device_ != nullptr && starts_transfers(plugin_);
}

Result<std::unique_ptr<exec::StageLink::Transfer>> GradientCommunicator::start_device_send(const void* data,
                                                                                           size_t bytes,
                                                                                           int to) {
  if (!moves_device_memory()) return StageLink::start_device_send(data, bytes, to);
  return start(true, const_cast<void*>(data), bytes, to);
}

Result<std::unique_ptr<exec::StageLink::Transfer>> GradientCommunicator::start_device_receive(void* data,
                                                                                              size_t bytes,
                                                                                              int from) {
  if (!moves_device_memory()) return StageLink::start_device_receive(data, bytes, from);
  return start(false, data, bytes, from);
}

// Host bytes on a communicator of device memory, through a device buffer
// of their own: a send's bytes are copied in before it starts, a
// receive's copied out once it finished; the buffer is freed then. A
// transfer dropped unfinished leaves its buffer to the plugin.
class GradientCommunicator::StagedTransfer final : public exec::StageLink::Transfer {
 public:
  StagedTransfer(GradientCommunicator& comm, void* buffer, void* host, size_t bytes,
                 std::unique_ptr<Transfer> inner)
      : comm_(comm), buffer_(buffer), host_(host), bytes_(bytes), inner_(std::move(inner)) {}
  Result<bool> finished() override {
    if (buffer_ == nullptr) return true;
    auto done = inner_->finished();
    if (done && !*done) return false;
    Result<void> copied;
    if (done && host_ != nullptr)
      copied = comm_.device_copy(false, host_, buffer_, bytes_, "pipeline: reading a message back");
    comm_.device_->backend().backend->mem_free(comm_.device_->get(), buffer_);
    buffer_ = nullptr;
    if (!done) return done.error();
    if (!copied) return copied.error();
    return true;
  }

 private:
  GradientCommunicator& comm_;
  void* buffer_;
  void* host_;  // a receive's destination; null for a send
  size_t bytes_;
  std::unique_ptr<Transfer> inner_;
};

Result<std::unique_ptr<exec::StageLink::Transfer>> GradientCommunicator::staged(bool sending, void* host,
                                                                                size_t bytes, int peer) {
  if (!starts_transfers(plugin_))
    return make_error("pipeline: comm plugin '" + plugin_.name +
                          "' has no started transfers on device memory (internal: the stages should "
                          "exchange host memory through mpi)",
                      TDM_INTERNAL);
  const tdm_backend_api& api = *device_->backend().backend;
  void* buffer = nullptr;
  if (api.mem_alloc(device_->get(), bytes == 0 ? 1 : bytes, &buffer) != TDM_OK)
    return make_error("pipeline: no device memory on " + device_->id() + " for a message of " +
                          std::to_string(bytes) + " bytes with stage " + std::to_string(peer),
                      TDM_OUT_OF_MEMORY);
  Result<std::unique_ptr<exec::StageLink::Transfer>> inner =
      make_error("pipeline: the message was not started", TDM_INTERNAL);
  if (auto copied =
          sending ? device_copy(true, buffer, host, bytes, "pipeline: staging a message") : Result<void>{};
      !copied)
    inner = copied.error();
  else
    inner = start(sending, buffer, bytes, peer);
  if (!inner) {
    api.mem_free(device_->get(), buffer);
    return inner.error();
  }
  return std::unique_ptr<exec::StageLink::Transfer>(
      std::make_unique<StagedTransfer>(*this, buffer, sending ? nullptr : host, bytes, std::move(*inner)));
}

Result<void> GradientCommunicator::broadcast(void* data, size_t bytes, int root) {
  return on_host_bytes(
      data, bytes, "pipeline: reading a value of stage " + std::to_string(root), [&](void* buffer) {
        return watched("broadcast", bytes, TDM_U8,
                       [&] { return plugin_.comm->broadcast(comm_, buffer, bytes, TDM_U8, root, nullptr); });
      });
}

}  // namespace tandem::host::train
