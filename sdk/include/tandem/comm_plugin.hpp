// Tandem SDK — comm plugins: tandem::Communicator, its C table, and
// comm_entry. Part of the header-only C++ helper; tandem.hpp includes it, so
// include either.
#ifndef TANDEM_COMM_PLUGIN_HPP
#define TANDEM_COMM_PLUGIN_HPP

#include <string>
#include <type_traits>
#include <utility>

#include "tandem/tandem.hpp"

namespace tandem {

// ---------------------------------------------------------------------------
// Comm plugins: C is constructed from the init info. A static
// `C::init(const Config&)` becomes the plugin's init, called once at load
// with its `--plugin-option NAME.key=value` options (sdk/ABI.md rule 38),
// and a static `C::shutdown()` its shutdown.
// ---------------------------------------------------------------------------
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual void allreduce(const void* send, void* recv, size_t count, tdm_dtype, tdm_reduce_op,
                         void* stream) = 0;
  virtual void allgather(const void* send, void* recv, size_t send_count, tdm_dtype, void* stream) = 0;
  virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, tdm_dtype, tdm_reduce_op,
                              void* stream) = 0;
  virtual void broadcast(void* buffer, size_t count, tdm_dtype, int32_t root, void* stream) = 0;
  virtual void barrier() = 0;
  // Point to point (ABI 1.15, optional): a communicator that overrides both
  // gets them in its table; one that does not leaves them NULL, and the
  // host refuses pipeline parallelism over it by name.
  virtual void send(const void* /*buffer*/, size_t /*count*/, tdm_dtype, int32_t /*peer*/, void* /*stream*/) {
    throw Error(TDM_UNSUPPORTED, "this comm plugin has no point-to-point send");
  }
  virtual void recv(void* /*buffer*/, size_t /*count*/, tdm_dtype, int32_t /*peer*/, void* /*stream*/) {
    throw Error(TDM_UNSUPPORTED, "this comm plugin has no point-to-point recv");
  }
  // The same started and left to run (ABI 1.16, optional; a communicator
  // that overrides all three gets them in its table). A started transfer
  // is the communicator's own object, returned as a tdm_comm_request*;
  // request_test returns true once it finished, and must have released it
  // then, as it must when it throws.
  virtual tdm_comm_request* send_start(const void* /*buffer*/, size_t /*count*/, tdm_dtype, int32_t /*peer*/,
                                       void* /*stream*/) {
    throw Error(TDM_UNSUPPORTED, "this comm plugin has no point-to-point send_start");
  }
  virtual tdm_comm_request* recv_start(void* /*buffer*/, size_t /*count*/, tdm_dtype, int32_t /*peer*/,
                                       void* /*stream*/) {
    throw Error(TDM_UNSUPPORTED, "this comm plugin has no point-to-point recv_start");
  }
  virtual bool request_test(tdm_comm_request* /*request*/) {
    throw Error(TDM_UNSUPPORTED, "this comm plugin has no point-to-point request_test");
  }
};

template <class C>
const tdm_plugin* comm_entry(const tdm_host_api* host, uint32_t major, uint32_t minor, PluginInfo info,
                             tdm_status (*unique_id)(void*, size_t*) = nullptr) noexcept {
  static detail::DescriptorStorage storage;
  static tdm_comm_api api{};
  try {
    if (!detail::accept_host(host, major, minor, info.name)) return nullptr;
    storage.fill(std::move(info), TDM_PLUGIN_COMM);
    api = tdm_comm_api{};
    api.struct_size = sizeof api;
    api.comm_unique_id = unique_id;
    api.comm_create = [](const tdm_comm_init_info* i, tdm_comm** out) {
      return guard([&] { *out = reinterpret_cast<tdm_comm*>(static_cast<Communicator*>(new C(*i))); });
    };
    api.comm_destroy = [](tdm_comm* c) { delete reinterpret_cast<Communicator*>(c); };
    api.allreduce = [](tdm_comm* c, const void* s, void* r, size_t n, tdm_dtype t, tdm_reduce_op op,
                       void* st) {
      return guard([&] { reinterpret_cast<Communicator*>(c)->allreduce(s, r, n, t, op, st); });
    };
    api.allgather = [](tdm_comm* c, const void* s, void* r, size_t n, tdm_dtype t, void* st) {
      return guard([&] { reinterpret_cast<Communicator*>(c)->allgather(s, r, n, t, st); });
    };
    api.reduce_scatter = [](tdm_comm* c, const void* s, void* r, size_t n, tdm_dtype t, tdm_reduce_op op,
                            void* st) {
      return guard([&] { reinterpret_cast<Communicator*>(c)->reduce_scatter(s, r, n, t, op, st); });
    };
    api.broadcast = [](tdm_comm* c, void* b, size_t n, tdm_dtype t, int32_t root, void* st) {
      return guard([&] { reinterpret_cast<Communicator*>(c)->broadcast(b, n, t, root, st); });
    };
    api.barrier = [](tdm_comm* c) { return guard([&] { reinterpret_cast<Communicator*>(c)->barrier(); }); };
    // Only a class that overrides them: &C::send names Communicator's otherwise.
    if constexpr (!std::is_same_v<decltype(&C::send), decltype(&Communicator::send)> &&
                  !std::is_same_v<decltype(&C::recv), decltype(&Communicator::recv)>) {
      api.send = [](tdm_comm* c, const void* b, size_t n, tdm_dtype t, int32_t peer, void* st) {
        return guard([&] { reinterpret_cast<Communicator*>(c)->send(b, n, t, peer, st); });
      };
      api.recv = [](tdm_comm* c, void* b, size_t n, tdm_dtype t, int32_t peer, void* st) {
        return guard([&] { reinterpret_cast<Communicator*>(c)->recv(b, n, t, peer, st); });
      };
    }
    if constexpr (!std::is_same_v<decltype(&C::send_start), decltype(&Communicator::send_start)> &&
                  !std::is_same_v<decltype(&C::recv_start), decltype(&Communicator::recv_start)> &&
                  !std::is_same_v<decltype(&C::request_test), decltype(&Communicator::request_test)>) {
      api.send_start = [](tdm_comm* c, const void* b, size_t n, tdm_dtype t, int32_t peer, void* st,
                          tdm_comm_request** out) {
        return guard([&] { *out = reinterpret_cast<Communicator*>(c)->send_start(b, n, t, peer, st); });
      };
      api.recv_start = [](tdm_comm* c, void* b, size_t n, tdm_dtype t, int32_t peer, void* st,
                          tdm_comm_request** out) {
        return guard([&] { *out = reinterpret_cast<Communicator*>(c)->recv_start(b, n, t, peer, st); });
      };
      api.request_test = [](tdm_comm* c, tdm_comm_request* q, int32_t* done) {
        return guard([&] { *done = reinterpret_cast<Communicator*>(c)->request_test(q) ? 1 : 0; });
      };
    }
    if constexpr (requires(const Config& c) { C::init(c); })
      storage.plugin.init = [](const tdm_config* config) { return guard([&] { C::init(Config(config)); }); };
    if constexpr (requires { C::shutdown(); })
      storage.plugin.shutdown = [] {
        try {
          C::shutdown();
        } catch (...) {  // nothing may leave a C entry point
        }
      };
    storage.plugin.comm = &api;
    return &storage.plugin;
  } catch (...) {
    Host::error(TDM_INTERNAL, "plugin entry failed while building its descriptor");
    return nullptr;
  }
}

}  // namespace tandem

#endif  // TANDEM_COMM_PLUGIN_HPP
