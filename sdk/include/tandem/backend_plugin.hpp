// Tandem SDK — backend plugins: the C table built from a tandem::Backend
// class, and backend_entry. Part of the header-only C++ helper; tandem.hpp
// includes it, so include either.
#ifndef TANDEM_BACKEND_PLUGIN_HPP
#define TANDEM_BACKEND_PLUGIN_HPP

#include <memory>
#include <string>
#include <utility>

#include "tandem/tandem.hpp"

namespace tandem {

// The backend's C table, built once per backend class B. B must be default
// constructible; it is created by init and destroyed by shutdown.
template <class B>
struct BackendAdapter {
  static std::unique_ptr<B>& instance() {
    static std::unique_ptr<B> b;
    return b;
  }
  static B& backend() {
    if (!instance()) throw Error(TDM_INTERNAL, "backend used before init");
    return *instance();
  }

  static const tdm_backend_api* table() {
    static const tdm_backend_api api = [] {
      tdm_backend_api t{};
      t.struct_size = sizeof t;
      fill_devices(t);
      fill_streams(t);
      fill_copies(t);
      fill_kernels(t);
      return t;
    }();
    return &api;
  }

 private:
  // Devices and memory.
  static void fill_devices(tdm_backend_api& t) {
    t.device_count = [](uint32_t* count) {
      return guard([&] {
        *count = 0;
        *count = backend().device_count();
      });
    };
    t.device_open = [](uint32_t index, tdm_device** out) {
      return guard([&] { *out = reinterpret_cast<tdm_device*>(&backend().device(index)); });
    };
    t.device_close = [](tdm_device*) {};  // devices live as long as the backend
    t.device_info = [](tdm_device* d, tdm_device_info* out) {
      return guard([&] {
        tdm_device_info full = detail::as_device(d).info();
        detail::copy_fitting(full, out);
      });
    };
    t.mem_alloc = [](tdm_device* d, size_t bytes, void** out) {
      return guard([&] { *out = detail::as_device(d).allocate(bytes); });
    };
    t.mem_free = [](tdm_device* d, void* p) { detail::as_device(d).deallocate(p); };
    t.host_alloc_pinned = [](tdm_device* d, size_t bytes, void** out) {
      return guard([&] { *out = detail::as_device(d).allocate_pinned(bytes); });
    };
    t.host_free_pinned = [](tdm_device* d, void* p) { detail::as_device(d).deallocate_pinned(p); };
  }
  // Streams and events.
  static void fill_streams(tdm_backend_api& t) {
    t.stream_create = [](tdm_device* d, tdm_stream** out) {
      return guard(
          [&] { *out = reinterpret_cast<tdm_stream*>(detail::as_device(d).create_stream().release()); });
    };
    t.stream_destroy = [](tdm_stream* s) { delete &detail::as_stream(s); };
    t.stream_synchronize = [](tdm_stream* s) { return guard([&] { detail::as_stream(s).synchronize(); }); };
    t.event_create = [](tdm_device* d, tdm_event** out) {
      return guard(
          [&] { *out = reinterpret_cast<tdm_event*>(detail::as_device(d).create_event().release()); });
    };
    t.event_destroy = [](tdm_event* e) { delete &detail::as_event(e); };
    t.event_record = [](tdm_event* e, tdm_stream* s) {
      return guard([&] { detail::as_event(e).record(detail::as_stream(s)); });
    };
    t.stream_wait_event = [](tdm_stream* s, tdm_event* e) {
      return guard([&] { detail::as_event(e).make_wait(detail::as_stream(s)); });
    };
    t.event_synchronize = [](tdm_event* e) { return guard([&] { detail::as_event(e).synchronize(); }); };
  }
  static void fill_copies(tdm_backend_api& t) {
    t.copy_h2d = [](tdm_stream* s, void* dst, const void* src, size_t n) {
      return guard([&] {
        Stream& st = detail::as_stream(s);
        st.device().copy(st, dst, src, n, CopyKind::HostToDevice);
      });
    };
    t.copy_d2h = [](tdm_stream* s, void* dst, const void* src, size_t n) {
      return guard([&] {
        Stream& st = detail::as_stream(s);
        st.device().copy(st, dst, src, n, CopyKind::DeviceToHost);
      });
    };
    t.copy_d2d = [](tdm_stream* s, void* dst, const void* src, size_t n) {
      return guard([&] {
        Stream& st = detail::as_stream(s);
        st.device().copy(st, dst, src, n, CopyKind::DeviceToDevice);
      });
    };
    t.peer_access = [](tdm_device* from, tdm_device* to, int32_t* out) {
      return guard([&] {
        *out = 0;
        *out = detail::as_device(from).peer_access(detail::as_device(to)) ? 1 : 0;
      });
    };
    t.copy_peer = [](tdm_stream* s, tdm_device* to, void* dst, const void* src, size_t n) {
      return guard([&] {
        Stream& st = detail::as_stream(s);
        st.device().copy_peer(st, detail::as_device(to), dst, src, n);
      });
    };
  }
  // Kernels, and the optional functions of ABI 1.1 and 1.3.
  static void fill_kernels(tdm_backend_api& t) {
    t.kernel_prepare = [](tdm_device* d, const tdm_op_desc* op, tdm_kernel** out, size_t* workspace) {
      return guard([&] {
        *out = nullptr;
        size_t ws = 0;
        std::unique_ptr<Kernel> k = detail::as_device(d).prepare(OpView(*op), ws);
        if (!k) throw Unsupported(std::string("op '") + (op->op ? op->op : "?") + "' is not implemented");
        *workspace = ws;
        *out = reinterpret_cast<tdm_kernel*>(k.release());
      });
    };
    t.kernel_launch = [](tdm_kernel* k, tdm_stream* s, void* const* in, void* const* out, void* ws) {
      return guard([&] { detail::as_kernel(k).launch(detail::as_stream(s), in, out, ws); });
    };
    t.kernel_release = [](tdm_kernel* k) { delete &detail::as_kernel(k); };
    t.stream_native_handle = [](tdm_stream* s) -> void* { return detail::as_stream(s).native_handle(); };
    t.memory_stats = [](tdm_device* d, tdm_memory_stats* out) {
      return guard([&] { detail::copy_fitting(detail::as_device(d).memory_stats(), out); });
    };
    t.memory_release_cached = [](tdm_device* d) {
      return guard([&] { detail::as_device(d).release_cached(); });
    };
    t.kernel_describe = [](tdm_kernel* k) -> const char* { return detail::as_kernel(k).describe(); };
    t.mem_footprint = [](tdm_device* d, uint64_t bytes, uint64_t* out) {
      return guard([&] { *out = detail::as_device(d).footprint(bytes); });
    };
    if constexpr (requires { requires B::kNativeLayouts; }) {
      t.kernel_layouts = [](tdm_device* d, const tdm_op_desc* op, uint8_t* accepts, uint8_t* offers,
                            uint64_t* native_bytes) {
        return guard(
            [&] { detail::as_device(d).kernel_layouts(OpView(*op), accepts, offers, native_bytes); });
      };
    }
  }
};

template <class B>
const tdm_plugin* backend_entry(const tdm_host_api* host, uint32_t major, uint32_t minor,
                                PluginInfo info) noexcept {
  static detail::DescriptorStorage storage;
  try {
    if (!detail::accept_host(host, major, minor, info.name)) return nullptr;
    storage.fill(std::move(info), TDM_PLUGIN_BACKEND);
    storage.plugin.init = [](const tdm_config*) {
      return guard([] {
        if (!BackendAdapter<B>::instance()) BackendAdapter<B>::instance() = std::make_unique<B>();
      });
    };
    storage.plugin.shutdown = [] { BackendAdapter<B>::instance().reset(); };
    storage.plugin.backend = BackendAdapter<B>::table();
    return &storage.plugin;
  } catch (...) {
    Host::error(TDM_INTERNAL, "plugin entry failed while building its descriptor");
    return nullptr;
  }
}

}  // namespace tandem

#endif  // TANDEM_BACKEND_PLUGIN_HPP
