// Tandem SDK — feature plugins: tandem::Feature, its C table, and
// feature_entry. Part of the header-only C++ helper; tandem.hpp includes it,
// so include either.
#ifndef TANDEM_FEATURE_PLUGIN_HPP
#define TANDEM_FEATURE_PLUGIN_HPP

#include <string>
#include <utility>

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
