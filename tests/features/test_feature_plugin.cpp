// A purpose-built feature plugin for the host's feature tests, written with
// the SDK's C++ helper. Built twice: "testfeature" and "testrival", which
// declare a conflict with each other.
//
// [features.testfeature] keys:
//   annotate = true    the graph pass (after autodiff) annotates every
//                      backward node with "testfeature.seen" = "1"
//   skip_every = N     before_optimizer_step skips steps whose index % N == 0
//   skip_if_env = "NAME=VALUE"
//                      ... only in a process whose environment has NAME set
//                      to VALUE (one rank of several: OMPI_COMM_WORLD_RANK=1)
//   agree = true       ... and every rank skips a step some rank skips, asked
//                      through tdm_host_api.run_ranks_max (as amp decides)
//   zero_lr = true     step_begin sets the run scalar "optim.lr" to 0
//   escape_from_step_end = true
//                      a C++ exception escapes the C table's on_step_end
//                      (bypassing the helper's guard), as a plugin
//                      written without it might let one: the host must
//                      stop the run naming the file and the hook
#include <tandem/tandem.hpp>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace {

bool g_escape_from_step_end = false;

class TestFeature final : public tandem::Feature {
 public:
  explicit TestFeature(const tandem::Config& config)
      : annotate_(config.get("annotate").value_or("false") == "true"),
        skip_every_(std::stol(config.get("skip_every").value_or("0"))),
        zero_lr_(config.get("zero_lr").value_or("false") == "true"),
        skip_here_(environment_matches(config.get("skip_if_env").value_or(""))),
        agree_(config.get("agree").value_or("false") == "true") {
    g_escape_from_step_end = config.get("escape_from_step_end").value_or("false") == "true";
    if (skip_every_ < 0) throw tandem::Error(TDM_INVALID_ARGUMENT, "skip_every must not be negative");
  }

  void graph_pass(tdm_graph* graph) override {
    if (!annotate_) return;
    const tdm_graph_api& g = *tandem::Host::api()->graph;
    for (size_t i = 0; i < g.node_count(graph); ++i) {
      tdm_node_info info{};
      info.struct_size = sizeof info;
      if (g.node_at(graph, i, &info) != TDM_OK) throw tandem::Error(TDM_INTERNAL, "node_at failed");
      if (info.phase == TDM_PHASE_BACKWARD &&
          g.node_annotate(graph, info.id, "testfeature.seen", "1") != TDM_OK)
        throw tandem::Error(TDM_INTERNAL, "node_annotate failed");
    }
  }

  void step_begin(const tdm_step_info& info) override {
    if (!zero_lr_) return;
    const tdm_host_api* h = tandem::Host::api();
    if (h->run_scalar_set(h->ctx, info.run, "optim.lr", 0.0) != TDM_OK)
      throw tandem::Error(TDM_INTERNAL, "could not set optim.lr");
  }

  bool before_optimizer_step(const tdm_step_info& info) override {
    const bool skip = skip_here_ && skip_every_ > 0 && info.step % skip_every_ == 0;
    if (!agree_) return skip;
    const tdm_host_api* h = tandem::Host::api();
    int32_t any = skip ? 1 : 0;
    if (h->run_ranks_max(h->ctx, info.run, &any) != TDM_OK)
      throw tandem::Error(TDM_INTERNAL, "run_ranks_max failed");
    return any != 0;
  }

 private:
  // "NAME=VALUE" holds in this process's environment ("" always holds).
  static bool environment_matches(const std::string& condition) {
    if (condition.empty()) return true;
    const size_t eq = condition.find('=');
    if (eq == std::string::npos) throw tandem::Error(TDM_INVALID_ARGUMENT, "skip_if_env must be NAME=VALUE");
    const char* value = std::getenv(condition.substr(0, eq).c_str());
    return value != nullptr && condition.substr(eq + 1) == value;
  }

  bool annotate_;
  long skip_every_;
  bool zero_lr_;
  bool skip_here_;
  bool agree_;
};

#ifndef TEST_FEATURE_NAME
#error "TEST_FEATURE_NAME must be defined"
#endif
#ifndef TEST_FEATURE_RIVAL
#error "TEST_FEATURE_RIVAL must be defined"
#endif
const char* const kConflicts[] = {TEST_FEATURE_RIVAL, nullptr};

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  tandem::FeatureTraits traits;
  traits.stage = TDM_PASS_AFTER_AUTODIFF;
  traits.conflicts_with = kConflicts;
  const tdm_plugin* base = tandem::feature_entry<TestFeature>(
      host, major, minor, {TEST_FEATURE_NAME, "0.1.0", "Feature plugin for the host's tests", {}}, traits);
  if (base == nullptr) return nullptr;
  // The helper's table, with an on_step_end that can let an exception out.
  static tdm_feature_api api;
  static tdm_plugin plugin;
  static tdm_status (*guarded_step_end)(tdm_feature*, const tdm_step_info*);
  api = *base->feature;
  guarded_step_end = api.on_step_end;
  api.on_step_end = [](tdm_feature* f, const tdm_step_info* i) -> tdm_status {
    if (g_escape_from_step_end) throw std::runtime_error("testfeature: thrown out of on_step_end");
    return guarded_step_end(f, i);
  };
  plugin = *base;
  plugin.feature = &api;
  return &plugin;
}
