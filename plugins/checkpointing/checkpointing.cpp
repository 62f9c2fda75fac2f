// checkpointing — activation recomputation as a feature plugin.
//
// [features.checkpointing]
//   segments = "auto"                 sqrt(n) segments of the n forward layers
//            | N                      N segments of nearly equal layer counts
//            | ["layer", ...]         a segment ends after each named layer
//   memory_budget = "64MiB"           with "auto": the least recomputation whose
//                                     estimated activations fit (bytes, KiB, MiB, GiB)
//
// Trades compute for memory: activations inside a segment are freed after
// forward and recomputed during backward (recompute.hpp). The pass runs after
// autodiff, when it can see which forward values backward reads.
#include <tandem/byte_size.hpp>
#include <tandem/tandem.hpp>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "graph_snapshot.hpp"
#include "recompute.hpp"
#include "segments.hpp"

namespace {

using tandem::Error;
using namespace tandem::checkpointing;

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\"'"), b = s.find_last_not_of(" \t\"'");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// A TOML array as the host hands it over: ["a", "b"].
std::vector<std::string> parse_list(const std::string& text) {
  std::vector<std::string> items;
  std::string body = text.substr(1, text.size() - 2), item;
  for (size_t at = 0; at <= body.size(); ++at) {
    if (at == body.size() || body[at] == ',') {
      if (!trim(item).empty()) items.push_back(trim(item));
      item.clear();
    } else {
      item += body[at];
    }
  }
  return items;
}

size_t parse_bytes(const std::string& text) {
  const std::optional<uint64_t> bytes = tandem::parse_byte_size(trim(text));
  if (!bytes)
    throw Error(TDM_INVALID_ARGUMENT,
                "[features.checkpointing] memory_budget must be a size such as \"512MiB\" "
                "(units B, KiB, MiB, GiB), got '" +
                    text + "'");
  return static_cast<size_t>(*bytes);
}

class Checkpointing final : public tandem::Feature {
 public:
  explicit Checkpointing(const tandem::Config& config) {
    for (const auto& [key, value] : config.values())
      if (key != "segments" && key != "memory_budget" && key.rfind("tandem.", 0) != 0)
        throw Error(TDM_INVALID_ARGUMENT, "[features.checkpointing]: unknown key '" + key +
                                              "' (expected: segments, memory_budget)");
    segments_ = trim(config.get("segments").value_or("auto"));
    if (auto budget = config.get("memory_budget")) budget_ = parse_bytes(*budget);
    if (budget_ > 0 && segments_ != "auto")
      throw Error(TDM_INVALID_ARGUMENT,
                  "[features.checkpointing] memory_budget needs segments = \"auto\" (got segments = " +
                      segments_ + ")");
  }

  void graph_pass(tdm_graph* graph) override {
    tandem::GraphEdit edit(graph);
    const GraphCopy copy = snapshot(edit);
    const std::vector<std::string> layers = forward_layers(copy);
    const auto saved = saved_bytes(copy);
    const auto outputs = output_bytes(copy);
    const Segments segments = choose(layers, saved, outputs);
    const RewriteStats stats = recompute(edit, copy, segments);
    std::string text;
    for (const auto& s : segments) text += (text.empty() ? "" : " | ") + s.front() + ".." + s.back();
    tandem::Host::log(TDM_LOG_INFO, std::to_string(segments.size()) + " segments (" + text + "); " +
                                        std::to_string(stats.cloned_nodes) + " forward nodes recomputed in " +
                                        std::to_string(stats.recomputed_segments) + " segments, " +
                                        std::to_string(stats.freed_bytes / 1024) +
                                        " KiB of activations freed after forward");
  }

 private:
  Segments choose(const std::vector<std::string>& layers, const std::map<std::string, size_t>& saved,
                  const std::map<std::string, size_t>& outputs) const {
    if (segments_ == "auto") {
      if (budget_ > 0) {
        Segments s = fit_budget(layers, saved, outputs, budget_);
        const size_t peak = estimated_peak(s, saved, outputs);
        if (peak > budget_)
          tandem::Host::log(TDM_LOG_WARNING, "the activations need about " + std::to_string(peak / 1024) +
                                                 " KiB even with " + std::to_string(s.size()) +
                                                 " segments, over memory_budget " +
                                                 std::to_string(budget_ / 1024) +
                                                 " KiB; use a smaller batch with grad_accum to fit");
        return s;
      }
      return split_evenly(layers, static_cast<size_t>(std::lround(std::sqrt(double(layers.size())))));
    }
    if (!segments_.empty() && segments_.front() == '[') return split_after(layers, parse_list(segments_));
    if (segments_ == "blocks") return split_by_blocks(layers);
    size_t used = 0;
    long n = 0;
    try {
      n = std::stol(segments_, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != segments_.size() || n < 1)
      throw Error(
          TDM_INVALID_ARGUMENT,
          "[features.checkpointing] segments must be \"auto\", \"blocks\" (one per repeated block), a number "
          "of segments >= 1, or a list of layer names, got '" +
              segments_ + "'");
    return split_evenly(layers, static_cast<size_t>(n));
  }

  std::string segments_;
  size_t budget_ = 0;
};

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  try {
    tandem::FeatureTraits traits;
    traits.stage = TDM_PASS_AFTER_AUTODIFF;
    return tandem::feature_entry<Checkpointing>(
        host, major, minor,
        {"checkpointing",
         "0.1.0",
         "Activation checkpointing: recompute segments of forward during backward",
         {}},
        traits);
  } catch (...) {  // the descriptor's strings allocate; nothing may escape a C entry point
    return nullptr;
  }
}
