// amp — mixed precision as a feature plugin.
//
// [features.amp] (keys in options.hpp): the compute-heavy ops of forward and
// backward run in bf16 (or f16) while parameters, their gradients and the
// optimizer stay f32 (master weights); the f32 list and the reasons are in
// autocast.cpp. With loss scaling (f16's default, optional for bf16) the
// loss gradient is multiplied by a dynamic scale, gradients are unscaled
// before the optimizer, and an overflowed step is skipped and logged; at the
// scale's floor the log names the layers whose gradients overflowed
// (loss_scaling.cpp, scaler.hpp).
//
// Pass stage: after autodiff, once (autocast.cpp says why). With grad_accum
// (after the optimizer) amp's pass has already run, so grad_accum sums the
// unscaled f32 gradients and the overflow sums span all micro-batches.
#include <tandem/tandem.hpp>

#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "autocast.hpp"
#include "loss_scaling.hpp"
#include "options.hpp"
#include "scaler.hpp"

namespace {

using tandem::Error;
using tandem::Host;

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

class Amp final : public tandem::Feature {
 public:
  explicit Amp(const tandem::Config& config) : options_(amp::parse_options(config)), scaler_(options_) {}

  void graph_pass(tdm_graph* graph) override {
    amp::GraphEdit g(graph);
    const amp::AutocastReport cast =
        amp::autocast(g, options_.dtype, options_.wide_products, options_.scaling == amp::Scaling::None);
    if (cast.converted == 0)
      Host::log(TDM_LOG_WARNING,
                "amp: no op of this model is on the low-precision list; it trains in f32 as before");
    if (options_.scaling != amp::Scaling::None) checks_ = amp::insert_loss_scaling(g, options_.initial_scale);
    Host::log(TDM_LOG_INFO, std::string("amp: ") + std::to_string(cast.converted) + " nodes run in " +
                                amp::dtype_name(options_.dtype) + ", " + std::to_string(cast.wide) +
                                " products from " + amp::dtype_name(options_.dtype) + " into f32 (" +
                                std::to_string(cast.casts) + " casts); loss scaling " + scaling_text());
  }

  void step_begin(const tdm_step_info& info) override {
    if (synced_ || options_.scaling != amp::Scaling::Dynamic) return;
    synced_ = true;  // a resumed run restored amp.loss_scale from its checkpoint
    double saved = 0;
    if (get(info, amp::kScaleState, saved) && saved > 0 && saved != scaler_.scale()) {
      scaler_.resume_at(saved);
      Host::log(TDM_LOG_INFO, "amp: continuing with the saved loss scale " + number(saved));
    }
  }

  bool before_optimizer_step(const tdm_step_info& info) override {
    if (options_.scaling == amp::Scaling::None) return false;
    std::vector<const amp::OverflowCheck*> overflowed;
    for (const amp::OverflowCheck& c : checks_) {
      double sum = 0;
      if (!get(info, c.state.c_str(), sum))
        throw Error(TDM_INTERNAL, "amp: cannot read the run scalar '" + c.state + "'");
      if (!std::isfinite(sum)) overflowed.push_back(&c);
      if (sum != 0) set(info, c.state.c_str(), 0.0);  // next step sums afresh
    }
    const amp::Scaler::Decision d = scaler_.update(any_rank(info, !overflowed.empty()));
    if (d.after != d.before) {
      set(info, amp::kScaleState, d.after);
      set(info, amp::kInverseState, 1.0 / d.after);
    }
    const std::string step = "amp: step " + std::to_string(info.step + 1) + ": ";
    if (d.grew)
      Host::log(TDM_LOG_INFO, step + std::to_string(options_.growth_interval) +
                                  " steps without overflow, loss scale " + number(d.before) + " -> " +
                                  number(d.after));
    if (!d.skip) return false;
    std::string layers, gradients;
    std::set<std::string> seen;
    for (const amp::OverflowCheck* c : overflowed) {
      gradients += (gradients.empty() ? "" : ", ") + c->gradient;
      if (seen.insert(c->layer).second) layers += (layers.empty() ? "'" : ", '") + c->layer + "'";
    }
    // The other ranks name their own layers in their own lines.
    const std::string where = overflowed.empty() ? "on another rank" : "in layer(s) " + layers;
    if (d.at_floor) {
      // The scale cannot go lower, so scaling is not the cause: say where.
      Host::log(TDM_LOG_ERROR, step + "gradients overflowed with the loss scale at its floor (min_scale " +
                                   number(options_.min_scale) + ") " + where +
                                   (gradients.empty() ? "" : " (" + gradients + ")") +
                                   "; step skipped. The overflow comes from the model or " +
                                   "its data, not the scale: lower [train] lr, add clip_grad_norm, check " +
                                   "the inputs of those layers, or train them in f32");
    } else {
      Host::log(TDM_LOG_WARNING,
                step + "gradients overflowed (" + where + "); step skipped, " +
                    (d.backed_off ? "loss scale " + number(d.before) + " -> " + number(d.after)
                                  : "loss scale stays " + number(d.after) +
                                        " (hysteresis: it backs off on the next overflow "
                                        "in a row)"));
    }
    return true;
  }

 private:
  // Every rank must skip the same steps and keep the same scale, so all
  // decide on whether any rank's gradients overflowed. A host older than
  // ABI 1.10 cannot say, and amp decides alone (such a host stops a
  // tensor-parallel run when the ranks' decisions differ).
  static bool any_rank(const tdm_step_info& info, bool overflow) {
    const tdm_host_api* h = Host::api();
    if (h->abi_minor < 10 || !TDM_STRUCT_HAS(h, tdm_host_api, run_ranks_max) || h->run_ranks_max == nullptr)
      return overflow;
    int32_t any = overflow ? 1 : 0;
    const tdm_status s = h->run_ranks_max(h->ctx, info.run, &any);
    if (s != TDM_OK)
      throw Error(s, "amp: step " + std::to_string(info.step + 1) +
                         ": the ranks could not agree on whether gradients overflowed (a rank failed or "
                         "did not reach the step in time)");
    return any != 0;
  }
  std::string scaling_text() const {
    switch (options_.scaling) {
      case amp::Scaling::Dynamic:
        return "dynamic from " + number(options_.initial_scale) + " (" + std::to_string(checks_.size()) +
               " gradients checked)";
      case amp::Scaling::Fixed:
        return "fixed at " + number(options_.initial_scale);
      default:
        return "off";
    }
  }
  static bool get(const tdm_step_info& info, const char* name, double& out) {
    const tdm_host_api* h = Host::api();
    return h->run_scalar_get(h->ctx, info.run, name, &out) == TDM_OK;
  }
  static void set(const tdm_step_info& info, const char* name, double value) {
    const tdm_host_api* h = Host::api();
    if (h->run_scalar_set(h->ctx, info.run, name, value) != TDM_OK)
      throw Error(TDM_INTERNAL, std::string("amp: cannot write the run scalar '") + name + "'");
  }

  amp::Options options_;
  amp::Scaler scaler_;
  std::vector<amp::OverflowCheck> checks_;
  bool synced_ = false;
};

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  try {
    tandem::FeatureTraits traits;
    traits.stage = TDM_PASS_AFTER_AUTODIFF;
    return tandem::feature_entry<Amp>(
        host, major, minor,
        {"amp", "0.1.0", "Mixed precision: bf16/f16 compute, f32 master weights, dynamic loss scaling", {}},
        traits);
  } catch (...) {  // the descriptor's strings allocate; nothing may escape a C entry point
    return nullptr;
  }
}
