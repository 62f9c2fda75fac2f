// Tandem SDK — feature plugins: tandem::Feature, its C table, and
// feature_entry. Part of the header-only C++ helper; tandem.hpp includes it,
// so include either.
#ifndef TANDEM_FEATURE_PLUGIN_HPP
#define TANDEM_FEATURE_PLUGIN_HPP

#include <string>
#include <utility>
#include <vector>

#include "tandem/tandem.hpp"

namespace tandem {

// ---------------------------------------------------------------------------
// Feature plugins: F is constructed from its Config for each run.
// ---------------------------------------------------------------------------
class Feature {
 public:
  virtual ~Feature() = default;
  virtual void graph_pass(tdm_graph*) {}
  virtual void step_begin(const tdm_step_info&) {}
  virtual void micro_batch_end(const tdm_step_info&) {}
  virtual void gradients_ready(const tdm_step_info&) {}
  // Return true to skip this optimizer step.
  virtual bool before_optimizer_step(const tdm_step_info&) { return false; }
  virtual void step_end(const tdm_step_info&) {}
  // Micro-batches per optimizer step (ABI 1.2); 0 = no opinion.
  virtual uint32_t micro_batches() { return 0; }
  // Samples per micro-batch (ABI 1.3); 0 = the model file's batch_size.
  virtual uint32_t micro_batch_size() { return 0; }
  // After the last step and checkpoint (ABI 1.12).
  virtual void run_end(const tdm_step_info&) {}
};

// The running step a hook was given (tdm_step_info.run): its scalars, and
// from on_step_begin, on_step_end and run_end its whole persistent tensors
// (ABI 1.12; sdk/ABI.md rule 44). Failures throw tandem::Error carrying the
// host's message, which the trampolines hand back to the host.
class Run {
 public:
  explicit Run(const tdm_step_info& info) : run_(info.run), h_(*Host::api()) {}

  double scalar(const std::string& name) const {
    double v = 0;
    check(h_.run_scalar_get(h_.ctx, run_, name.c_str(), &v), "reading " + name);
    return v;
  }
  void set_scalar(const std::string& name, double value) const {
    check(h_.run_scalar_set(h_.ctx, run_, name.c_str(), value), "writing " + name);
  }

  struct Tensor {
    tdm_dtype dtype = TDM_DTYPE_INVALID;
    std::vector<int64_t> dims;
    std::vector<unsigned char> bytes;  // row-major
  };
  Tensor read(const std::string& name) const {
    need(TDM_STRUCT_HAS(&h_, tdm_host_api, run_tensor_read) && h_.run_tensor_read != nullptr, name);
    tdm_tensor_desc d{};
    d.struct_size = sizeof d;
    check(h_.run_tensor_desc(h_.ctx, run_, name.c_str(), &d), "describing " + name);
    Tensor t;
    t.dtype = d.dtype;
    t.dims.assign(d.dims, d.dims + d.rank);
    size_t count = 1;
    for (int64_t n : t.dims) count *= static_cast<size_t>(n);
    t.bytes.resize(count * dtype_size(d.dtype));
    check(h_.run_tensor_read(h_.ctx, run_, name.c_str(), t.bytes.data(), t.bytes.size()), "reading " + name);
    return t;
  }
  void write(const std::string& name, const void* data, size_t bytes) const {
    need(TDM_STRUCT_HAS(&h_, tdm_host_api, run_tensor_write) && h_.run_tensor_write != nullptr, name);
    check(h_.run_tensor_write(h_.ctx, run_, name.c_str(), data, bytes), "writing " + name);
  }
  // {name in the file, run value} pairs into `file_name` in the run directory.
  void save(const std::string& file_name,
            const std::vector<std::pair<std::string, std::string>>& tensors) const {
    need(TDM_STRUCT_HAS(&h_, tdm_host_api, run_save_tensors) && h_.run_save_tensors != nullptr, file_name);
    std::vector<tdm_saved_tensor> list;
    for (const auto& [file_tensor, value] : tensors) {
      tdm_saved_tensor t{};
      t.struct_size = sizeof t;
      t.name = file_tensor.c_str();
      t.value_name = value.c_str();
      list.push_back(t);
    }
    check(h_.run_save_tensors(h_.ctx, run_, file_name.c_str(), list.data(), list.size()),
          "saving " + file_name);
  }

 private:
  // The host appends its own reason (which names the value, file or rule).
  static void check(tdm_status status, const std::string& what) {
    if (status != TDM_OK) throw Error(status, what + " failed");
  }
  void need(bool present, const std::string& what) const {
    if (!present)
      throw Error(TDM_UNSUPPORTED,
                  what + ": this host predates whole-tensor access (ABI 1.12); update tandem");
  }
  tdm_run* run_;
  const tdm_host_api& h_;
};

struct FeatureTraits {
  tdm_pass_stage stage = TDM_PASS_BEFORE_AUTODIFF;
  const char* const* requires_features = nullptr;  // NULL-terminated, static
  const char* const* conflicts_with = nullptr;     // NULL-terminated, static
};

template <class F>
const tdm_plugin* feature_entry(const tdm_host_api* host, uint32_t major, uint32_t minor, PluginInfo info,
                                FeatureTraits traits = {}) noexcept {
  static detail::DescriptorStorage storage;
  static tdm_feature_api api{};
  try {
    if (!detail::accept_host(host, major, minor, info.name)) return nullptr;
    storage.fill(std::move(info), TDM_PLUGIN_FEATURE);
    api = tdm_feature_api{};
    api.struct_size = sizeof api;
    api.pass_stage = traits.stage;
    api.requires_features = traits.requires_features;
    api.conflicts_with = traits.conflicts_with;
    api.create = [](const tdm_config* section, tdm_feature** out) {
      return guard(
          [&] { *out = reinterpret_cast<tdm_feature*>(static_cast<Feature*>(new F(Config(section)))); });
    };
    api.destroy = [](tdm_feature* f) { delete reinterpret_cast<Feature*>(f); };
    api.graph_pass = [](tdm_feature* f, tdm_graph* g) {
      return guard([&] { reinterpret_cast<Feature*>(f)->graph_pass(g); });
    };
    api.on_step_begin = [](tdm_feature* f, const tdm_step_info* i) {
      return guard([&] { reinterpret_cast<Feature*>(f)->step_begin(*i); });
    };
    api.on_micro_batch_end = [](tdm_feature* f, const tdm_step_info* i) {
      return guard([&] { reinterpret_cast<Feature*>(f)->micro_batch_end(*i); });
    };
    api.on_gradients_ready = [](tdm_feature* f, const tdm_step_info* i) {
      return guard([&] { reinterpret_cast<Feature*>(f)->gradients_ready(*i); });
    };
    api.before_optimizer_step = [](tdm_feature* f, const tdm_step_info* i, int32_t* skip) {
      return guard([&] { *skip = reinterpret_cast<Feature*>(f)->before_optimizer_step(*i) ? 1 : 0; });
    };
    api.on_step_end = [](tdm_feature* f, const tdm_step_info* i) {
      return guard([&] { reinterpret_cast<Feature*>(f)->step_end(*i); });
    };
    api.micro_batches = [](tdm_feature* f) -> uint32_t {
      uint32_t n = 0;
      return guard([&] { n = reinterpret_cast<Feature*>(f)->micro_batches(); }) == TDM_OK ? n : 0;
    };
    api.on_run_end = [](tdm_feature* f, const tdm_step_info* i) {
      return guard([&] { reinterpret_cast<Feature*>(f)->run_end(*i); });
    };
    api.micro_batch_size = [](tdm_feature* f) -> uint32_t {
      uint32_t n = 0;
      return guard([&] { n = reinterpret_cast<Feature*>(f)->micro_batch_size(); }) == TDM_OK ? n : 0;
    };
    storage.plugin.feature = &api;
    return &storage.plugin;
  } catch (...) {
    Host::error(TDM_INTERNAL, "plugin entry failed while building its descriptor");
    return nullptr;
  }
}

}  // namespace tandem

#endif  // TANDEM_FEATURE_PLUGIN_HPP
