#include "place/cost_model.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/atomic_file.hpp"
#include "exec/device_objects.hpp"
#include "exec/tensor_text.hpp"
#include "plugin/plugin_call.hpp"
#include "util/fnv1a.hpp"
#include "util/format.hpp"
#include "util/host_memory.hpp"
#include "util/last_error.hpp"
#include "util/logger.hpp"

namespace tandem::host::place {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr int kCacheFormat = 1;

// Which build of a plugin the figures were measured with: its file's size
// and modification time (the fast path: unchanged, no reading), and a
// fingerprint of its bytes, read only when the stamp differs — a rebuild
// without a version bump changes the bytes, a reinstall of the same file
// only the stamp.
struct PluginBuild {
  std::string file;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  std::string fingerprint;  // FNV-1a 64 of the bytes; empty until needed
};

PluginBuild stamp_of(const std::filesystem::path& file) {
  PluginBuild b;
  b.file = file.string();
  std::error_code ec;
  b.size = std::filesystem::file_size(file, ec);
  const auto mtime = std::filesystem::last_write_time(file, ec);
  if (!ec)
    b.mtime_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count();
  return b;
}

// "" when the file cannot be read (then no cache can vouch for it).
std::string fingerprint_of(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return "";
  uint64_t h = kFnv1aBasis;
  std::vector<char> chunk(1 << 20);
  while (in.read(chunk.data(), std::streamsize(chunk.size())) || in.gcount() > 0)
    h = fnv1a64(std::string_view(chunk.data(), size_t(in.gcount())), h);
  return hex64(h);
}

json build_json(const PluginBuild& b) {
  return {{"file", b.file}, {"size", b.size}, {"mtime_ns", b.mtime_ns}, {"fnv1a64", b.fingerprint}};
}

// Whether `cached` (a cache's "plugin_build") is the build in `current`;
// fills current.fingerprint when it had to read the file.
bool same_build(const json& cached, PluginBuild& current) {
  if (!cached.is_object()) return false;
  if (cached.value("file", "") == current.file && cached.value("size", uint64_t(0)) == current.size &&
      cached.value("mtime_ns", int64_t(0)) == current.mtime_ns) {
    current.fingerprint = cached.value("fnv1a64", "");
    return !current.fingerprint.empty();
  }
  current.fingerprint = fingerprint_of(current.file);
  return !current.fingerprint.empty() && cached.value("fnv1a64", "") == current.fingerprint;
}

std::string attr_text(const AttrValue& value) {
  std::ostringstream out;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>>) {
          out << '[';
          for (size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
          out << ']';
        } else {
          out << v;
        }
      },
      value);
  return out.str();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::string default_cache_dir() {
  if (const char* dir = std::getenv("TANDEM_CACHE_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return std::string(xdg) + "/tandem";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return std::string(home) + "/.cache/tandem";
  return (std::filesystem::temp_directory_path() / "tandem-cache").string();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Device buffers of one measurement, given back to the device's allocator.
class Scratch {
 public:
  explicit Scratch(const DeviceHandle& d) : device_(d) {}
  ~Scratch() {
    for (void* p : buffers_) device_.allocator().free(p);
    device_.allocator().release_cached();  // calibration must not keep memory from the run
  }
  Result<void*> get(size_t bytes, const std::string& what) {
    auto p = device_.allocator().allocate(bytes, what);
    if (p) buffers_.push_back(*p);
    return p;
  }
  void give_back(void* p) {
    device_.allocator().free(p);
    buffers_.erase(std::find(buffers_.begin(), buffers_.end(), p));
  }

 private:
  const DeviceHandle& device_;
  std::vector<void*> buffers_;
};

// latency + bytes / bandwidth through two sizes, each copy timed by `once`
// seven times (the medians).
Result<CopyCost> fit_copy(size_t small, size_t large, const std::function<Result<double>(size_t)>& once) {
  std::vector<double> t_small, t_large;
  for (int i = 0; i < 7; ++i) {
    auto s = once(small);
    auto l = once(large);
    if (!s) return s.error();
    if (!l) return l.error();
    t_small.push_back(*s);
    t_large.push_back(*l);
  }
  const double ts = median(t_small), tl = median(t_large);
  CopyCost c;
  c.bytes_per_us = tl > ts ? static_cast<double>(large - small) / (tl - ts) : static_cast<double>(large) / tl;
  c.latency_us = std::max(0.0, ts - static_cast<double>(small) / c.bytes_per_us);
  return c;
}

Result<void> checked(tdm_status status, const std::string& what) {
  if (status == TDM_OK) return {};
  return make_error(what + ": " + last_error_text(silent_failure(status)), status);
}

// Inputs hold small valid numbers: 0.01 in f32 (no denormals, no overflow in
// exp or log), zero bytes otherwise (index 0 is valid for every lookup),
// except an s32 scalar, which is a step or count: 1 (adamw_update's first).
std::vector<unsigned char> input_bytes(const TensorType& type) {
  std::vector<unsigned char> bytes(exec::tensor_bytes(type), 0);
  if (type.dtype == TDM_S32 && type.dims.empty()) {
    const int32_t one = 1;
    std::memcpy(bytes.data(), &one, sizeof one);
  }
  if (type.dtype == TDM_F32) {
    const float value = 0.01f;
    for (size_t i = 0; i + sizeof value <= bytes.size(); i += sizeof value)
      std::memcpy(&bytes[i], &value, sizeof value);
  }
  return bytes;
}

constexpr double kTimingBudgetUs = 200000;  // per op, beyond its warm-up launch

Result<OpCost> measure(const DeviceHandle& device, const exec::OpSpec& spec) {
  auto kernel = exec::KernelBinding::prepare(device, spec);
  if (!kernel) {
    if (kernel.error().status == TDM_UNSUPPORTED) return OpCost{false, 0, 0, kernel.error().message};
    return kernel.error();
  }
  const tdm_backend_api& api = *device.backend().backend;
  const std::string what = "calibrating " + spec.op + " on " + device.id();
  // An op larger than the machine is not timed (its inputs are staged in
  // host memory): placement sees it as not fitting, as when allocation fails.
  uint64_t bytes = kernel->workspace_bytes();
  for (const auto& input : spec.inputs)
    if (input) bytes += exec::tensor_bytes(*input);
  for (const TensorType& output : spec.outputs) bytes += exec::tensor_bytes(output);
  if (const uint64_t host = physical_memory_bytes(); host > 0 && bytes > host)
    return make_error(
        what + " needs " + human_bytes(bytes) + ", more than this machine's " + human_bytes(host),
        TDM_OUT_OF_MEMORY);
  auto stream = exec::OwnedStream::create(device, "calibration");
  if (!stream) return stream.error();
  Scratch scratch(device);
  std::vector<void*> inputs, outputs;
  for (const auto& input : spec.inputs) {
    if (!input) {
      inputs.push_back(nullptr);
      continue;
    }
    const auto host = input_bytes(*input);
    auto p = scratch.get(host.size(), "an input of " + what);
    if (!p) return p.error();
    if (auto r = checked(api.copy_h2d(stream->get(), *p, host.data(), host.size()), what); !r)
      return r.error();
    if (auto r = checked(api.stream_synchronize(stream->get()), what); !r) return r.error();
    inputs.push_back(*p);
  }
  for (const TensorType& output : spec.outputs) {
    auto p = scratch.get(exec::tensor_bytes(output), "an output of " + what);
    if (!p) return p.error();
    outputs.push_back(*p);
  }
  void* workspace = nullptr;
  if (kernel->workspace_bytes() > 0) {
    auto p = scratch.get(kernel->workspace_bytes(), "the workspace of " + what);
    if (!p) return p.error();
    workspace = *p;
  }
  const auto launch = [&]() -> Result<double> {
    const auto start = Clock::now();
    clear_last_error();
    const tdm_status launched = call_plugin(device.backend(), "kernel_launch", [&] {
      return api.kernel_launch(kernel->get(), stream->get(), inputs.data(), outputs.data(), workspace);
    });
    if (auto r = checked(launched, what); !r) return plugin_failure(r.error().message, r.error().status);
    if (auto r = checked(api.stream_synchronize(stream->get()), what); !r) return r.error();
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  };
  auto warm = launch();
  if (!warm) return warm.error();
  // An op slower than the whole timing budget is timed once after its warm-up.
  const size_t least = *warm > kTimingBudgetUs ? 1 : 3;
  std::vector<double> times;
  double total = 0;
  while (times.size() < least || (total < 1000 && times.size() < 25)) {
    auto t = launch();
    if (!t) return t.error();
    times.push_back(*t);
    total += *t;
    if (total > kTimingBudgetUs) break;  // a slow op: a few launches say enough
  }
  return OpCost{true, median(times), kernel->workspace_bytes(), ""};
}

}  // namespace

std::string op_cost_key(const exec::OpSpec& spec) {
  std::string key = exec::op_signature(spec) + " ->";
  for (const TensorType& t : spec.outputs) key += " " + exec::type_text(t);
  for (const Attr& a : spec.attrs) key += " " + a.name + "=" + attr_text(a.value);
  return key;
}

struct CostModel::DeviceCosts {
  std::string file;
  json identity;  // what the figures are valid for, besides the plugin's build
  PluginBuild build;
  std::map<std::string, OpCost> ops;
  std::map<std::string, CopyCost> copies;  // to another device, by id
  bool changed = false;
  bool announced = false;  // the user was told this device is being timed
};

CostModel::CostModel(std::map<std::string, const DeviceHandle*> devices, CostModelOptions options)
    : devices_(std::move(devices)), options_(std::move(options)) {
  if (options_.cache_dir.empty()) options_.cache_dir = default_cache_dir();
}

CostModel::~CostModel() = default;

void CostModel::measure_as(const std::string& id, const std::string& device) {
  aliases_[id] = device;
}

const std::string& CostModel::measured_as(const std::string& id) const {
  auto it = aliases_.find(id);
  return it != aliases_.end() ? it->second : id;
}

std::string CostModel::cache_file(const std::string& device) const {
  std::string name = device;
  std::replace(name.begin(), name.end(), ':', '-');
  return options_.cache_dir + "/costs/" + host_name() + "/" + name + ".json";
}

Result<CostModel::DeviceCosts*> CostModel::costs_of(const std::string& device) {
  if (auto it = loaded_.find(device); it != loaded_.end()) return it->second.get();
  auto handle = devices_.find(device);
  if (handle == devices_.end())
    return make_error("no cost model for " + device + ": not a device of this run", TDM_INVALID_ARGUMENT);
  auto costs = std::make_unique<DeviceCosts>();
  costs->file = cache_file(device);
  auto info = handle->second->info();
  costs->identity = {{"format", kCacheFormat},
                     {"device", device},
                     {"device_name", info ? info->name : std::string()},
                     {"plugin_version", handle->second->backend().version},
                     {"context", options_.context}};
  costs->build = stamp_of(handle->second->backend().path);
  std::ifstream in(costs->file);
  if (options_.read_cache && in) {
    try {
      const json cache = json::parse(in);
      const bool same_identity = cache.at("identity") == costs->identity;
      const bool same = same_identity && same_build(cache.value("plugin_build", json()), costs->build);
      // The same bytes under a new stamp (a reinstall): keep the figures,
      // write the new stamp so the next run takes the fast path.
      costs->changed = same && cache.value("plugin_build", json()) != build_json(costs->build);
      if (same) {
        for (const auto& [key, c] : cache.at("ops").items())
          costs->ops[key] = OpCost{c.at("supported").get<bool>(), c.at("us").get<double>(),
                                   c.at("workspace").get<size_t>(), c.value("why", std::string())};
        for (const auto& [to, c] : cache.at("copies").items())
          costs->copies[to] = CopyCost{c.at("latency_us").get<double>(), c.at("bytes_per_us").get<double>()};
      } else if (same_identity) {
        log_info(costs->file + " was measured with another build of " +
                 handle->second->backend().path.string() + " (the file's bytes changed): recalibrating");
      } else {
        log_info(costs->file + " was measured for another plugin version, device or setting: recalibrating");
      }
    } catch (const std::exception& e) {
      log_warning(costs->file + " is not a valid cost cache (" + e.what() + "): recalibrating");
      costs->ops.clear();
      costs->copies.clear();
    }
  }
  return (loaded_[device] = std::move(costs)).get();
}

Result<OpCost> CostModel::op(const std::string& asked, const exec::OpSpec& spec) {
  const std::string& device = measured_as(asked);
  auto costs = costs_of(device);
  if (!costs) return costs.error();
  const std::string key = op_cost_key(spec);
  if (auto it = (*costs)->ops.find(key); it != (*costs)->ops.end()) return it->second;
  if (!(*costs)->announced) {
    // Timing every op can take minutes on a slow backend: say why nothing happens.
    log_warning("timing each op on " + device + " for placement and step-time estimates (once: cached in " +
                (*costs)->file + ")");
    (*costs)->announced = true;
  }
  auto measured = measure(*devices_.at(device), spec);
  if (!measured && measured.error().status == TDM_OUT_OF_MEMORY) {
    OpCost none{false, 0, 0, measured.error().message, true};
    return none;
  }
  if (!measured) return measured.error();
  ++calibrated_;
  (*costs)->ops[key] = *measured;
  (*costs)->changed = true;
  return *measured;
}

Result<double> CostModel::copy_micros(const std::string& asked_from, const std::string& asked_to,
                                      size_t bytes) {
  const std::string &from = measured_as(asked_from), &to = measured_as(asked_to);
  auto costs = costs_of(from);
  if (!costs) return costs.error();
  auto it = (*costs)->copies.find(to);
  if (it == (*costs)->copies.end()) {
    const DeviceHandle& a = *devices_.at(from);
    auto b_handle = devices_.find(to);
    if (b_handle == devices_.end())
      return make_error("no cost model for " + to + ": not a device of this run", TDM_INVALID_ARGUMENT);
    const DeviceHandle& b = *b_handle->second;
    auto ai = a.info();
    auto bi = b.info();
    if (!ai) return ai.error();
    if (!bi) return bi.error();
    const std::string what = "measuring copies " + from + " -> " + to;
    auto sa = exec::OwnedStream::create(a, "calibration");
    auto sb = exec::OwnedStream::create(b, "calibration");
    if (!sa) return sa.error();
    if (!sb) return sb.error();
    Scratch scratch_a(a), scratch_b(b);
    // Two sizes: the small one gives the latency, the large one the bandwidth.
    // A re-plan measures while the run holds most of a device, so the large
    // size shrinks to what the devices can spare, down to twice the small.
    const size_t small = 4096;
    size_t large = size_t(8) << 20;
    Result<void*> src = nullptr, dst = nullptr;
    for (;; large /= 2) {
      src = scratch_a.get(large, what);
      dst = src ? scratch_b.get(large, what) : Result<void*>(src.error());
      if (src && dst) break;
      if (src) scratch_a.give_back(*src);
      const tdm_status why = src ? dst.error().status : src.error().status;
      if (why != TDM_OUT_OF_MEMORY || large / 2 < 2 * small) return src ? dst.error() : src.error();
    }
    std::vector<unsigned char> staging(large, 1);
    const tdm_backend_api& api_a = *a.backend().backend;
    const tdm_backend_api& api_b = *b.backend().backend;
    if (auto r = checked(api_a.copy_h2d(sa->get(), *src, staging.data(), large), what); !r) return r.error();
    if (auto r = checked(api_a.stream_synchronize(sa->get()), what); !r) return r.error();
    // The routes of the composed executor's copies (exec/copy_engine.hpp):
    // a memcpy between host memories, one device copy when one side is host
    // memory, a peer copy between two devices of a backend that has them,
    // else through host staging.
    const bool a_host = ai->host_addressable, b_host = bi->host_addressable;
    const bool peer = !a_host && !b_host && a.copies_directly_to(b);
    const auto once = [&](size_t n) -> Result<double> {
      const auto start = Clock::now();
      if (a_host && b_host) {
        std::memcpy(*dst, *src, n);
      } else if (b_host) {
        if (auto r = checked(api_a.copy_d2h(sa->get(), *dst, *src, n), what); !r) return r.error();
        if (auto r = checked(api_a.stream_synchronize(sa->get()), what); !r) return r.error();
      } else if (a_host) {
        if (auto r = checked(api_b.copy_h2d(sb->get(), *dst, *src, n), what); !r) return r.error();
        if (auto r = checked(api_b.stream_synchronize(sb->get()), what); !r) return r.error();
      } else if (peer) {
        if (auto r = checked(api_a.copy_peer(sa->get(), b.get(), *dst, *src, n), what); !r) return r.error();
        if (auto r = checked(api_a.stream_synchronize(sa->get()), what); !r) return r.error();
      } else {
        if (auto r = checked(api_a.copy_d2h(sa->get(), staging.data(), *src, n), what); !r) return r.error();
        if (auto r = checked(api_a.stream_synchronize(sa->get()), what); !r) return r.error();
        if (auto r = checked(api_b.copy_h2d(sb->get(), *dst, staging.data(), n), what); !r) return r.error();
        if (auto r = checked(api_b.stream_synchronize(sb->get()), what); !r) return r.error();
      }
      return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    };
    auto fitted = fit_copy(small, large, once);
    if (!fitted) return fitted.error();
    it = (*costs)->copies.emplace(to, *fitted).first;
    (*costs)->changed = true;
  }
  return it->second.micros(bytes);
}

// Between the device and host memory of the kind streamed values live in
// (pinned where the device has it): copy_h2d and copy_d2h on a stream of
// the device, each way timed and the two averaged.
Result<double> CostModel::host_link_micros(const std::string& asked, size_t bytes) {
  const std::string& device = measured_as(asked);
  auto costs = costs_of(device);
  if (!costs) return costs.error();
  auto it = (*costs)->copies.find(kHostMemory);
  if (it == (*costs)->copies.end()) {
    const DeviceHandle& d = *devices_.at(device);
    const std::string what = "measuring copies between " + device + " and host memory";
    auto stream = exec::OwnedStream::create(d, "calibration");
    if (!stream) return stream.error();
    Scratch scratch(d);
    const size_t small = 4096;
    size_t large = size_t(8) << 20;
    Result<void*> buffer = nullptr;
    for (;; large /= 2) {
      buffer = scratch.get(large, what);
      if (buffer || buffer.error().status != TDM_OUT_OF_MEMORY || large / 2 < 2 * small) break;
    }
    if (!buffer) return buffer.error();
    auto host = exec::HostStaging::allocate(large, {&d});
    if (!host) return host.error();
    const tdm_backend_api& api = *d.backend().backend;
    const auto once = [&](size_t n) -> Result<double> {
      const auto start = Clock::now();
      if (auto r = checked(api.copy_h2d(stream->get(), *buffer, host->data(), n), what); !r) return r.error();
      if (auto r = checked(api.copy_d2h(stream->get(), host->data(), *buffer, n), what); !r) return r.error();
      if (auto r = checked(api.stream_synchronize(stream->get()), what); !r) return r.error();
      return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / 2;
    };
    auto fitted = fit_copy(small, large, once);
    if (!fitted) return fitted.error();
    it = (*costs)->copies.emplace(kHostMemory, *fitted).first;
    (*costs)->changed = true;
  }
  return it->second.micros(bytes);
}

Result<void> CostModel::save() {
  for (auto& [device, costs] : loaded_) {
    if (!costs->changed) continue;
    json ops = json::object(), copies = json::object();
    for (const auto& [key, c] : costs->ops) {
      ops[key] = {{"supported", c.supported}, {"us", c.micros}, {"workspace", c.workspace}};
      if (!c.why.empty()) ops[key]["why"] = c.why;
    }
    for (const auto& [to, c] : costs->copies)
      copies[to] = {{"latency_us", c.latency_us}, {"bytes_per_us", c.bytes_per_us}};
    if (costs->build.fingerprint.empty()) costs->build.fingerprint = fingerprint_of(costs->build.file);
    const json cache = {{"identity", costs->identity},
                        {"plugin_build", build_json(costs->build)},
                        {"ops", ops},
                        {"copies", copies}};
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(costs->file).parent_path(), ec);
    if (ec)
      return make_error("cannot create the cost cache directory of " + costs->file + ": " + ec.message() +
                            " (set TANDEM_CACHE_DIR to a writable directory)",
                        TDM_UNAVAILABLE);
    const std::string text = cache.dump(1) + "\n";
    if (auto r = checkpoint::write_file_atomically(costs->file, {text}); !r)
      return make_error("cannot write the cost cache: " + r.error().message +
                            " (set TANDEM_CACHE_DIR to a writable directory)",
                        r.error().status);
    costs->changed = false;
  }
  return {};
}

}  // namespace tandem::host::place
