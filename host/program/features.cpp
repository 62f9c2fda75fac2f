#include "program/features.hpp"

#include <algorithm>

#include "graph/graph_api.hpp"
#include "lowering/model_graph.hpp"
#include "plugin/call_window.hpp"
#include "plugin/config_store.hpp"
#include "plugin/plugin_call.hpp"
#include "util/last_error.hpp"
#include "util/logger.hpp"

namespace tandem::host::program {
namespace {

std::vector<std::string> names(const char* const* list) {
  std::vector<std::string> out;
  for (; list != nullptr && *list != nullptr; ++list) out.emplace_back(*list);
  return out;
}

Error failure(const LoadedPlugin& feature, const std::string& what, tdm_status status) {
  return make_error("feature '" + feature.name + "' (" + feature.path.string() + ") failed in " + what +
                        ": " + last_error_text(silent_failure(status)),
                    status);
}

// Where [features.NAME]'s settings came from: "model.toml:14:1",
// "--feature amp:dtype=f16", or both joined.
std::string origins_of(const model::ModelSpec& spec, const std::string& name) {
  auto it = spec.feature_origins.find(name);
  if (it == spec.feature_origins.end() || it->second.empty())
    return "[features." + name + "] in " + spec.path;
  std::string text;
  for (const std::string& where : it->second) text += (text.empty() ? "" : " and ") + where;
  return text;
}

}  // namespace

FeatureSet::~FeatureSet() {
  for (auto it = active_.rbegin(); it != active_.rend(); ++it)
    if (it->instance != nullptr)
      if (call_plugin(*it->plugin, "destroy", [&] { it->plugin->feature->destroy(it->instance); }) != TDM_OK)
        log_warning("feature '" + it->plugin->name + "' (" + it->plugin->path.string() +
                    "): " + last_error_text("destroy failed"));
}

// The model file's features, and grad_accum where [train]
// pipeline_microbatches asks for micro-batches and the file has no
// [features.grad_accum] (the accumulation is grad_accum's).
static std::map<std::string, std::map<std::string, std::string>> with_implied(const model::ModelSpec& spec) {
  auto features = spec.features;
  const int64_t micro = spec.train.pipeline_microbatches;
  if (micro > 1 && features.count("grad_accum") == 0)
    features["grad_accum"]["micro_batch"] = std::to_string(spec.train.batch_size / micro);
  return features;
}

Result<std::unique_ptr<FeatureSet>> FeatureSet::create(const PluginRegistry& registry,
                                                       const model::ModelSpec& spec,
                                                       uint32_t backend_abi_minor) {
  std::unique_ptr<FeatureSet> set(new FeatureSet());
  for (const auto& [name, section] : with_implied(spec)) {
    const LoadedPlugin* plugin = registry.find(name);
    if (plugin == nullptr || plugin->kind != TDM_PLUGIN_FEATURE || plugin->feature == nullptr)
      return make_error(origins_of(spec, name) + ": [features." + name + "] needs a feature plugin named '" +
                            name + "', but none was loaded (install tandem-plugin-" + name +
                            ", or see where Tandem looked with 'tandem plugins -v')",
                        TDM_NOT_FOUND);
    for (const std::string& needed : names(plugin->feature->requires_features))
      if (spec.features.count(needed) == 0)
        return make_error("feature '" + name + "' requires feature '" + needed + "': add [features." +
                              needed + "] to " + spec.path,
                          TDM_INVALID_ARGUMENT);
    for (const std::string& other : names(plugin->feature->conflicts_with))
      if (spec.features.count(other) > 0)
        return make_error("features '" + name + "' and '" + other + "' cannot be combined (" + name +
                              " declares the conflict): remove one of [features." + name +
                              "] and [features." + other + "] from " + spec.path,
                          TDM_INVALID_ARGUMENT);
    std::map<std::string, std::string> entries = section;
    if (plugin->abi_minor_effective >= 3)  // read-only facts the feature may need (feature.h)
      entries["tandem.batch_size"] = std::to_string(spec.train.batch_size);
    if (plugin->abi_minor_effective >= lowering::kWideProductsMinor)
      entries["tandem.wide_products"] = backend_abi_minor >= lowering::kWideProductsMinor ? "1" : "0";
    ConfigSectionView config(std::move(entries));
    tdm_feature* instance = nullptr;
    const tdm_status created =
        call_plugin(*plugin, "create", [&] { return plugin->feature->create(config.get(), &instance); });
    if (created != TDM_OK || instance == nullptr)
      return failure(*plugin, "create (check " + origins_of(spec, name) + ")",
                     created == TDM_INTERNAL ? TDM_INTERNAL : TDM_INVALID_ARGUMENT);
    set->active_.push_back({plugin, instance});
  }
  return set;
}

Result<void> FeatureSet::run_passes(tdm_pass_stage stage, Graph& graph) {
  for (const Active& a : active_) {
    const tdm_feature_api& api = *a.plugin->feature;
    if (api.pass_stage != stage || api.graph_pass == nullptr) continue;
    const CallWindow window(CallWindow::kGraphPass, to_c(graph));
    const tdm_status status =
        call_plugin(*a.plugin, "graph_pass", [&] { return api.graph_pass(a.instance, to_c(graph)); });
    if (status != TDM_OK) return failure(*a.plugin, "its graph pass", status);
  }
  return {};
}

Result<void> FeatureSet::call_hooks(HookOf hook_of, const char* what, const tdm_step_info& info,
                                    bool boundary) {
  for (const Active& a : active_) {
    const Hook fn = hook_of(*a.plugin);
    if (fn == nullptr) continue;
    const CallWindow window(CallWindow::kStepHook, info.run);
    // Whole tensors only between optimizer steps (feature.h).
    const CallWindow tensors(CallWindow::kStepBoundary, boundary ? info.run : nullptr);
    const tdm_status status = call_plugin(*a.plugin, what, [&] { return fn(a.instance, &info); });
    if (status != TDM_OK) return failure(*a.plugin, what, status);
  }
  return {};
}

Result<void> FeatureSet::step_begin(const tdm_step_info& info) {
  return call_hooks([](const LoadedPlugin& p) { return p.feature->on_step_begin; }, "step_begin", info, true);
}
Result<void> FeatureSet::micro_batch_end(const tdm_step_info& info) {
  return call_hooks([](const LoadedPlugin& p) { return p.feature->on_micro_batch_end; }, "micro_batch_end",
                    info, false);
}
Result<void> FeatureSet::gradients_ready(const tdm_step_info& info) {
  return call_hooks([](const LoadedPlugin& p) { return p.feature->on_gradients_ready; }, "gradients_ready",
                    info, false);
}
Result<void> FeatureSet::step_end(const tdm_step_info& info) {
  return call_hooks([](const LoadedPlugin& p) { return p.feature->on_step_end; }, "step_end", info, true);
}

Result<void> FeatureSet::run_end(const tdm_step_info& info) {
  // A hook of ABI 1.12: absent from an older plugin's shorter table.
  const HookOf run_end = [](const LoadedPlugin& p) -> Hook {
    if (p.abi_minor_effective < kRunEndMinor || !TDM_STRUCT_HAS(p.feature, tdm_feature_api, on_run_end))
      return nullptr;
    return p.feature->on_run_end;
  };
  return call_hooks(run_end, "run_end", info, true);
}

Result<bool> FeatureSet::before_optimizer_step(const tdm_step_info& info) {
  bool skip = false;
  for (const Active& a : active_) {
    const auto fn = a.plugin->feature->before_optimizer_step;
    if (fn == nullptr) continue;
    int32_t wants_skip = 0;
    const CallWindow window(CallWindow::kStepHook, info.run);
    const tdm_status status =
        call_plugin(*a.plugin, "before_optimizer_step", [&] { return fn(a.instance, &info, &wants_skip); });
    if (status != TDM_OK) return failure(*a.plugin, "before_optimizer_step", status);
    skip = skip || wants_skip != 0;
  }
  return skip;
}

std::string FeatureSet::skip_deciders() const {
  std::string names;
  for (const Active& a : active_)
    if (a.plugin->feature->before_optimizer_step != nullptr)
      names += (names.empty() ? "'" : ", '") + a.plugin->name + "'";
  return names;
}

}  // namespace tandem::host::program

namespace tandem::host::program {

Result<uint32_t> FeatureSet::micro_batch_size() const {
  uint32_t result = 0;
  std::string who;
  for (const Active& a : active_) {
    const tdm_feature_api& api = *a.plugin->feature;
    if (a.plugin->abi_minor_effective < 3 || !TDM_STRUCT_HAS(&api, tdm_feature_api, micro_batch_size) ||
        api.micro_batch_size == nullptr)
      continue;
    uint32_t n = 0;
    const tdm_status status =
        call_plugin(*a.plugin, "micro_batch_size", [&] { n = api.micro_batch_size(a.instance); });
    if (status != TDM_OK) return failure(*a.plugin, "micro_batch_size", status);
    if (n == 0) continue;
    if (result > 0)
      return make_error("features '" + who + "' and '" + a.plugin->name + "' both split batches; enable one",
                        TDM_INVALID_ARGUMENT);
    result = n;
    who = a.plugin->name;
  }
  return result;
}

Result<uint32_t> FeatureSet::micro_batches() const {
  uint32_t result = 1;
  std::string who;
  for (const Active& a : active_) {
    const tdm_feature_api& api = *a.plugin->feature;
    if (a.plugin->abi_minor_effective < 2 || !TDM_STRUCT_HAS(&api, tdm_feature_api, micro_batches) ||
        api.micro_batches == nullptr)
      continue;
    uint32_t n = 0;
    const tdm_status status =
        call_plugin(*a.plugin, "micro_batches", [&] { n = api.micro_batches(a.instance); });
    if (status != TDM_OK) return failure(*a.plugin, "micro_batches", status);
    if (n <= 1) continue;
    if (result > 1)
      return make_error(
          "features '" + who + "' and '" + a.plugin->name + "' both accumulate gradients; enable one",
          TDM_INVALID_ARGUMENT);
    result = n;
    who = a.plugin->name;
  }
  return result;
}

}  // namespace tandem::host::program
