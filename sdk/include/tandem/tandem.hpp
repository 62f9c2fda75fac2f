// Tandem SDK — header-only C++ helper for plugin authors.
//
// Implement a C++ class, get the C table. Exceptions never cross the plugin
// boundary: every trampoline here catches everything, reports the message
// through host->set_error and returns a status (sdk/ABI.md rule 14). The C
// ABI in tandem.h stays the contract; this file is a convenience compiled
// into the plugin, so its C++ types never travel between libraries.
//
//   class MyDevice : public tandem::Device { ... };
//   class MyBackend : public tandem::Backend { ... };
//   extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(
//       const tdm_host_api* host, uint32_t major, uint32_t minor) {
//     return tandem::backend_entry<MyBackend>(host, major, minor,
//         {"mybackend", "0.1.0", "What it does, in one line.", {}});
//   }
#ifndef TANDEM_TANDEM_HPP
#define TANDEM_TANDEM_HPP

#include <cstdarg>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tandem/tandem.h"

namespace tandem {

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

// Thrown by plugin code; becomes the returned status and the host message.
class Error : public std::runtime_error {
 public:
  Error(tdm_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  tdm_status status() const noexcept { return status_; }

 private:
  tdm_status status_;
};

// "Not here": a normal answer from prepare (op, dtype or attribute the
// backend does not implement). The message says why, for verbose mode.
class Unsupported : public Error {
 public:
  explicit Unsupported(const std::string& why) : Error(TDM_UNSUPPORTED, why) {}
};

// ---------------------------------------------------------------------------
// Host services, as handed to the entry point
// ---------------------------------------------------------------------------
class Host {
 public:
  static void bind(const tdm_host_api* api) noexcept { slot() = api; }
  static const tdm_host_api* api() noexcept { return slot(); }

  static void log(tdm_log_level level, const std::string& message) noexcept {
    const tdm_host_api* h = slot();
    if (h != nullptr && h->log != nullptr) h->log(h->ctx, level, message.c_str());
  }
  static void error(tdm_status status, const std::string& message) noexcept {
    const tdm_host_api* h = slot();
    if (h != nullptr && h->set_error != nullptr) h->set_error(h->ctx, status, "%s", message.c_str());
  }
  // Value of a host configuration key ("threads"; sdk/ABI.md rule 40 lists
  // them all), if present. A feature's own options come in its section.
  static std::optional<std::string> config(const std::string& key) {
    const tdm_host_api* h = slot();
    if (h == nullptr || h->config_get == nullptr) return std::nullopt;
    std::string buffer(256, '\0');
    size_t size = buffer.size();
    tdm_status status = h->config_get(h->ctx, key.c_str(), buffer.data(), &size);
    if (status == TDM_INVALID_ARGUMENT && size > buffer.size()) {
      buffer.resize(size);
      status = h->config_get(h->ctx, key.c_str(), buffer.data(), &size);
    }
    if (status != TDM_OK) return std::nullopt;
    buffer.resize(size > 0 ? size - 1 : 0);
    return buffer;
  }

 private:
  static const tdm_host_api*& slot() noexcept {
    static const tdm_host_api* api = nullptr;
    return api;
  }
};

// Runs `body`, turning any exception into a status plus host message.
template <class Body>
tdm_status guard(Body&& body) noexcept {
  try {
    body();
    return TDM_OK;
  } catch (const Error& e) {
    Host::error(e.status(), e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    Host::error(TDM_OUT_OF_MEMORY, "host memory exhausted inside the plugin");
    return TDM_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    Host::error(TDM_INTERNAL, e.what());
    return TDM_INTERNAL;
  } catch (...) {
    Host::error(TDM_INTERNAL, "unknown exception inside the plugin");
    return TDM_INTERNAL;
  }
}

// ---------------------------------------------------------------------------
// Configuration section, copied out of the C view
// ---------------------------------------------------------------------------
class Config {
 public:
  Config() = default;
  explicit Config(const tdm_config* config) {
    if (config == nullptr) return;
    for (size_t i = 0; i < config->n_entries; ++i) {
      const tdm_config_entry& e = config->entries[i];
      if (e.key != nullptr) values_[e.key] = e.value != nullptr ? e.value : "";
    }
  }
  std::optional<std::string> get(const std::string& key) const {
    auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }
  const std::map<std::string, std::string>& values() const noexcept { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

// ---------------------------------------------------------------------------
// Read-only view of an op description, valid during prepare
// ---------------------------------------------------------------------------
inline size_t dtype_size(tdm_dtype dtype) noexcept {
  switch (dtype) {
    case TDM_F64:
    case TDM_S64:
      return 8;
    case TDM_F32:
    case TDM_S32:
      return 4;
    case TDM_F16:
    case TDM_BF16:
      return 2;
    case TDM_S8:
    case TDM_U8:
      return 1;
    default:
      return 0;
  }
}

inline const char* dtype_name(tdm_dtype dtype) noexcept {
  switch (dtype) {
    case TDM_F32:
      return "f32";
    case TDM_F64:
      return "f64";
    case TDM_F16:
      return "f16";
    case TDM_BF16:
      return "bf16";
    case TDM_S8:
      return "s8";
    case TDM_U8:
      return "u8";
    case TDM_S32:
      return "s32";
    case TDM_S64:
      return "s64";
    default:
      return "invalid";
  }
}

// A collective's reduction as comm plugins name it in their messages.
inline const char* reduce_op_name(tdm_reduce_op op) noexcept {
  switch (op) {
    case TDM_REDUCE_SUM:
      return "SUM";
    case TDM_REDUCE_MAX:
      return "MAX";
    case TDM_REDUCE_MIN:
      return "MIN";
    case TDM_REDUCE_AVG:
      return "AVG";
    default:
      return "?";
  }
}

// Owned copy of a tensor description (shape and dtype).
struct TensorShape {
  tdm_dtype dtype = TDM_F32;
  std::vector<int64_t> dims;

  TensorShape() = default;
  TensorShape(tdm_dtype t, std::vector<int64_t> d) : dtype(t), dims(std::move(d)) {}
  explicit TensorShape(const tdm_tensor_desc& d) : dtype(d.dtype) {
    if (d.dims != nullptr) dims.assign(d.dims, d.dims + d.rank);
  }
  size_t rank() const noexcept { return dims.size(); }
  int64_t numel() const noexcept {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  size_t bytes() const noexcept { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  // Appends piece by piece: g++ 12/13 warn falsely (-Wrestrict) on chains of
  // std::string operator+ at -O3, which would break -Werror plugin builds.
  std::string str() const {
    std::string s = dtype_name(dtype);
    s += '[';
    for (size_t i = 0; i < dims.size(); ++i) {
      if (i > 0) s += ',';
      s += std::to_string(dims[i]);
    }
    s += ']';
    return s;
  }
};

class OpView {
 public:
  explicit OpView(const tdm_op_desc& d) : desc_(d) {
    for (size_t i = 0; i < d.n_inputs; ++i) inputs_.emplace_back(d.inputs[i]);
    for (size_t i = 0; i < d.n_outputs; ++i) outputs_.emplace_back(d.outputs[i]);
  }
  std::string op() const { return desc_.op != nullptr ? desc_.op : ""; }
  uint32_t version() const noexcept { return desc_.op_version; }
  const std::vector<TensorShape>& inputs() const noexcept { return inputs_; }
  const std::vector<TensorShape>& outputs() const noexcept { return outputs_; }
  // Present only when the host speaks ABI >= 1.1.
  std::string node_name() const {
    if (TDM_STRUCT_HAS(&desc_, tdm_op_desc, node_name) && desc_.node_name != nullptr) return desc_.node_name;
    return "";
  }
  // Whether the host chose the backend's native layout for input i / output j
  // (ABI 1.3); plain when the host did not say.
  bool input_native(size_t i) const noexcept { return layout_at(i) == TDM_LAYOUT_NATIVE; }
  bool output_native(size_t j) const noexcept { return layout_at(desc_.n_inputs + j) == TDM_LAYOUT_NATIVE; }

  // The attributes as the host gave them, in its order.
  const tdm_attr* attrs() const noexcept { return desc_.attrs; }
  size_t n_attrs() const noexcept { return desc_.n_attrs; }
  const tdm_attr* attr(const char* name) const noexcept {
    for (size_t i = 0; i < desc_.n_attrs; ++i)
      if (desc_.attrs[i].name != nullptr && std::strcmp(desc_.attrs[i].name, name) == 0)
        return &desc_.attrs[i];
    return nullptr;
  }
  int64_t int_attr(const char* name, int64_t fallback) const {
    const tdm_attr* a = attr(name);
    if (a == nullptr) return fallback;
    if (a->type != TDM_ATTR_INT)
      throw Error(TDM_INVALID_ARGUMENT,
                  std::string("attribute '") + name + "' of " + op() + " must be an integer");
    return a->i;
  }
  double float_attr(const char* name, double fallback) const {
    const tdm_attr* a = attr(name);
    if (a == nullptr) return fallback;
    if (a->type == TDM_ATTR_INT) return static_cast<double>(a->i);
    if (a->type != TDM_ATTR_FLOAT)
      throw Error(TDM_INVALID_ARGUMENT,
                  std::string("attribute '") + name + "' of " + op() + " must be a number");
    return a->f;
  }
  std::string string_attr(const char* name, const std::string& fallback) const {
    const tdm_attr* a = attr(name);
    if (a == nullptr) return fallback;
    if (a->type != TDM_ATTR_STRING || a->s == nullptr)
      throw Error(TDM_INVALID_ARGUMENT,
                  std::string("attribute '") + name + "' of " + op() + " must be a string");
    return a->s;
  }
  std::vector<int64_t> ints_attr(const char* name, std::vector<int64_t> fallback) const {
    const tdm_attr* a = attr(name);
    if (a == nullptr) return fallback;
    if (a->type == TDM_ATTR_INT) return {a->i};
    if (a->type != TDM_ATTR_INTS)
      throw Error(TDM_INVALID_ARGUMENT,
                  std::string("attribute '") + name + "' of " + op() + " must be a list of integers");
    return std::vector<int64_t>(a->ints, a->ints + a->count);
  }

 private:
  uint8_t layout_at(size_t k) const noexcept {
    if (!TDM_STRUCT_HAS(&desc_, tdm_op_desc, layouts) || desc_.layouts == nullptr) return TDM_LAYOUT_PLAIN;
    return k < desc_.n_inputs + desc_.n_outputs ? desc_.layouts[k] : uint8_t(TDM_LAYOUT_PLAIN);
  }
  const tdm_op_desc& desc_;
  std::vector<TensorShape> inputs_;
  std::vector<TensorShape> outputs_;
};

// ---------------------------------------------------------------------------
// Backend classes. Defaults describe a synchronous, host-addressable device
// (a CPU backend overrides only what it must).
// ---------------------------------------------------------------------------
class Device;

class Stream {
 public:
  explicit Stream(Device& device) : device_(device) {}
  virtual ~Stream() = default;
  Device& device() const noexcept { return device_; }
  virtual void synchronize() {}
  virtual void* native_handle() noexcept { return nullptr; }

 private:
  Device& device_;
};

class Event {
 public:
  explicit Event(Device& device) : device_(device) {}
  virtual ~Event() = default;
  Device& device() const noexcept { return device_; }
  virtual void record(Stream&) {}
  virtual void make_wait(Stream&) {}  // the stream waits for this event
  virtual void synchronize() {}

 private:
  Device& device_;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void launch(Stream& stream, void* const* inputs, void* const* outputs, void* workspace) = 0;
  virtual const char* describe() const noexcept { return ""; }
};

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

class Device {
 public:
  virtual ~Device() = default;
  // Fill name, kind, memory figures; the adapter copies what fits.
  virtual tdm_device_info info() = 0;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* pointer) noexcept = 0;
  // Pinned host memory; the default says "none" (the host falls back).
  virtual void* allocate_pinned(size_t) { throw Unsupported("this device has no pinned host memory"); }
  virtual void deallocate_pinned(void*) noexcept {}
  virtual std::unique_ptr<Stream> create_stream() { return std::make_unique<Stream>(*this); }
  virtual std::unique_ptr<Event> create_event() { return std::make_unique<Event>(*this); }
  // Default: host-addressable memory, so every copy is a memcpy.
  virtual void copy(Stream&, void* dst, const void* src, size_t bytes, CopyKind) {
    if (bytes != 0) std::memmove(dst, src, bytes);
  }
  // Return the kernel, or throw Unsupported("why").
  virtual std::unique_ptr<Kernel> prepare(const OpView& op, size_t& workspace_bytes) = 0;
  // Native layouts (ABI 1.3, backend.h kernel_layouts): set accepts[i] /
  // offers[j] to 1 and native_bytes[j] where prepare can take input i / give
  // output j in the native layout (arrays of n_inputs / n_outputs, zeroed).
  // Only wired into the table when the Backend class declares
  // `static constexpr bool kNativeLayouts = true;`: the others leave the
  // function NULL, so the host knows they have no native layouts at all.
  virtual void kernel_layouts(const OpView&, uint8_t* /*accepts*/, uint8_t* /*offers*/,
                              uint64_t* /*native_bytes*/) {}
  // The device memory an allocation of `bytes` takes (ABI 1.6,
  // backend.h mem_footprint): override when allocate() rounds requests
  // up (size classes, pages), so the host plans with what it really uses.
  virtual uint64_t footprint(uint64_t bytes) { return bytes; }
  // Copies straight into another device `to` of the same backend (ABI 1.7,
  // backend.h peer_access and copy_peer). peer_access answers whether
  // copy_peer works from this device into `to`, turning on what that needs;
  // the default says no, and the host copies through host memory.
  virtual bool peer_access(Device& /*to*/) { return false; }
  virtual void copy_peer(Stream&, Device& /*to*/, void* /*dst*/, const void* /*src*/, size_t /*bytes*/) {
    throw Unsupported("this backend does not copy between its devices");
  }
  // Optional statistics; the default reports nothing beyond zeros.
  virtual tdm_memory_stats memory_stats() {
    tdm_memory_stats s{};
    s.struct_size = sizeof s;
    return s;
  }
  virtual void release_cached() {}
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Throw Error(TDM_UNAVAILABLE, "driver not found") when there is none.
  virtual uint32_t device_count() = 0;
  virtual Device& device(uint32_t index) = 0;
};

// ---------------------------------------------------------------------------
// Descriptor glue
// ---------------------------------------------------------------------------
struct PluginInfo {
  std::string name;
  std::string version;
  std::string description;
  std::vector<std::pair<std::string, std::string>> vendors;  // {library, version}
};

namespace detail {

// Storage behind a tdm_plugin descriptor: strings live as long as the process.
struct DescriptorStorage {
  PluginInfo info;
  std::vector<tdm_vendor_version> vendors;
  tdm_plugin plugin{};

  void fill(PluginInfo i, tdm_plugin_kind kind) {
    info = std::move(i);
    vendors.clear();
    for (const auto& v : info.vendors) {
      tdm_vendor_version vv{};
      vv.struct_size = sizeof vv;
      vv.name = v.first.c_str();
      vv.version = v.second.c_str();
      vendors.push_back(vv);
    }
    plugin = tdm_plugin{};
    plugin.struct_size = sizeof plugin;
    plugin.abi_major = TDM_ABI_MAJOR;
    plugin.abi_minor = TDM_ABI_MINOR;
    plugin.name = info.name.c_str();
    plugin.kind = kind;
    plugin.version = info.version.c_str();
    plugin.sdk_version = TDM_SDK_VERSION;
    plugin.description = info.description.c_str();
    plugin.vendors = vendors.empty() ? nullptr : vendors.data();
    plugin.n_vendors = vendors.size();
  }
};

inline bool accept_host(const tdm_host_api* host, uint32_t major, uint32_t minor, const std::string& name) {
  Host::bind(host);
  (void)minor;  // minors only append: anything the host lacks, we do not call
  if (major != TDM_ABI_MAJOR) {
    Host::error(TDM_VERSION_MISMATCH,
                "plugin '" + name + "' was built for Tandem ABI " + std::to_string(TDM_ABI_MAJOR) + "." +
                    std::to_string(TDM_ABI_MINOR) + " but the host speaks ABI " + std::to_string(major) +
                    "." + std::to_string(minor) + "; rebuild the plugin against the host's SDK");
    return false;
  }
  return true;
}

inline Device& as_device(tdm_device* d) {
  return *reinterpret_cast<Device*>(d);
}
inline Stream& as_stream(tdm_stream* s) {
  return *reinterpret_cast<Stream*>(s);
}
inline Event& as_event(tdm_event* e) {
  return *reinterpret_cast<Event*>(e);
}
inline Kernel& as_kernel(tdm_kernel* k) {
  return *reinterpret_cast<Kernel*>(k);
}

// Copies the fields of `full` that fit the receiver's struct_size.
template <class T>
void copy_fitting(const T& full, T* out) {
  uint32_t size = out->struct_size < sizeof(T) ? out->struct_size : static_cast<uint32_t>(sizeof(T));
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(uint32_t),
              reinterpret_cast<const char*>(&full) + sizeof(uint32_t),
              size > sizeof(uint32_t) ? size - sizeof(uint32_t) : 0);
}

}  // namespace detail

}  // namespace tandem

// The adapters of the three plugin kinds (each includes this file first).
#include "tandem/backend_plugin.hpp"
#include "tandem/comm_plugin.hpp"
#include "tandem/feature_plugin.hpp"

#endif  // TANDEM_TANDEM_HPP
