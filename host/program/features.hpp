// The feature plugins a model file enables ([features.NAME] sections): found
// among the loaded plugins, checked against each other (each declares what
// it requires and what it cannot run with), created with their sections, and
// called at their graph-pass stage and at each step hook.
//
// Failures name the feature and carry the plugin's own message.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "model/model_spec.hpp"
#include "plugin/registry.hpp"

namespace tandem::host::program {

// The ABI minor that brought on_run_end and the whole-tensor functions.
constexpr uint32_t kRunEndMinor = 12;

class FeatureSet {
 public:
  // `backend_abi_minor`: the lowest negotiated minor of the run's backends,
  // for the read-only facts the features are told (feature.h).
  static Result<std::unique_ptr<FeatureSet>> create(const PluginRegistry& registry,
                                                    const model::ModelSpec& spec, uint32_t backend_abi_minor);
  // No feature (evaluation graphs run without them).
  static std::unique_ptr<FeatureSet> none() { return std::unique_ptr<FeatureSet>(new FeatureSet()); }
  ~FeatureSet();
  FeatureSet(const FeatureSet&) = delete;
  FeatureSet& operator=(const FeatureSet&) = delete;

  bool empty() const noexcept { return active_.empty(); }
  // Runs the graph pass of every feature registered for `stage`, in the
  // order of the model file.
  Result<void> run_passes(tdm_pass_stage stage, Graph& graph);

  Result<void> step_begin(const tdm_step_info& info);
  Result<void> micro_batch_end(const tdm_step_info& info);
  Result<void> gradients_ready(const tdm_step_info& info);
  // True when any feature asks to skip this optimizer step (e.g. overflow).
  Result<bool> before_optimizer_step(const tdm_step_info& info);
  // The names of the features that may ask ('amp', 'x'), for messages.
  std::string skip_deciders() const;
  Result<void> step_end(const tdm_step_info& info);
  // After the run's last step and checkpoint (ABI 1.12's on_run_end).
  Result<void> run_end(const tdm_step_info& info);
  // Micro-batches per optimizer step (ABI 1.2): 1 unless a feature says more;
  // two features asking for accumulation is an error.
  Result<uint32_t> micro_batches() const;
  // Samples per micro-batch when a feature splits batches (ABI 1.3), else 0.
  Result<uint32_t> micro_batch_size() const;

 private:
  struct Active {
    const LoadedPlugin* plugin = nullptr;
    tdm_feature* instance = nullptr;
  };
  FeatureSet() = default;
  using Hook = tdm_status (*)(tdm_feature*, const tdm_step_info*);
  using HookOf = Hook (*)(const LoadedPlugin&);  // a plugin's hook, or null when it has none
  // `boundary`: between optimizer steps, where whole tensors may be reached.
  Result<void> call_hooks(HookOf hook_of, const char* what, const tdm_step_info& info, bool boundary);

  std::vector<Active> active_;
};

}  // namespace tandem::host::program
