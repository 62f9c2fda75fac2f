#include "segments.hpp"

#include <algorithm>
#include <set>

namespace tandem::checkpointing {
namespace {

bool is_forward(const NodeCopy& n) {
  return n.phase == TDM_PHASE_FORWARD && n.layer != "loss";
}

}  // namespace

std::vector<std::string> forward_layers(const GraphCopy& graph) {
  std::vector<std::string> layers;
  for (const NodeCopy& n : graph.nodes)
    if (is_forward(n) && std::find(layers.begin(), layers.end(), n.layer) == layers.end())
      layers.push_back(n.layer);
  return layers;
}

std::map<std::string, size_t> saved_bytes(const GraphCopy& graph) {
  std::set<tdm_value_id> read_by_backward;
  for (const NodeCopy& n : graph.nodes)
    if (n.phase == TDM_PHASE_BACKWARD) read_by_backward.insert(n.inputs.begin(), n.inputs.end());
  std::map<std::string, size_t> bytes;
  for (const NodeCopy& n : graph.nodes) {
    if (!is_forward(n)) continue;
    for (tdm_value_id v : n.outputs)
      if (read_by_backward.count(v) > 0) bytes[n.layer] += graph.value(v).bytes();
  }
  return bytes;
}

std::map<std::string, size_t> output_bytes(const GraphCopy& graph) {
  std::map<std::string, size_t> bytes;
  for (const NodeCopy& n : graph.nodes)
    if (is_forward(n) && !n.outputs.empty()) bytes[n.layer] = graph.value(n.outputs[0]).bytes();
  return bytes;
}

Segments split_evenly(const std::vector<std::string>& layers, size_t n) {
  n = std::max<size_t>(1, std::min(n, layers.size()));
  Segments segments(n);
  for (size_t i = 0; i < layers.size(); ++i) segments[i * n / layers.size()].push_back(layers[i]);
  return segments;
}

Segments split_after(const std::vector<std::string>& layers, const std::vector<std::string>& ends) {
  for (const std::string& e : ends)
    if (std::find(layers.begin(), layers.end(), e) == layers.end()) {
      std::string known;
      for (const std::string& l : layers) known += (known.empty() ? "" : ", ") + l;
      throw Error(TDM_INVALID_ARGUMENT, "[features.checkpointing] segments names layer '" + e +
                                            "', which has no forward computation; layers: " + known);
    }
  Segments segments(1);
  for (const std::string& l : layers) {
    segments.back().push_back(l);
    if (std::find(ends.begin(), ends.end(), l) != ends.end()) segments.emplace_back();
  }
  if (segments.back().empty()) segments.pop_back();
  return segments;
}

namespace {

// "h.3" for "h.3.attn" (a copy of a repeat block: a middle component of
// digits), "" for a layer outside any block.
std::string block_copy(const std::string& layer) {
  const size_t first = layer.find('.');
  if (first == std::string::npos) return "";
  const size_t second = layer.find('.', first + 1);
  if (second == std::string::npos || second == first + 1) return "";
  for (size_t i = first + 1; i < second; ++i)
    if (layer[i] < '0' || layer[i] > '9') return "";
  return layer.substr(0, second);
}

}  // namespace

Segments split_by_blocks(const std::vector<std::string>& layers) {
  std::vector<std::string> ends;
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string copy = block_copy(layers[i]);
    const bool last_of_copy = !copy.empty() && (i + 1 == layers.size() || block_copy(layers[i + 1]) != copy);
    if (last_of_copy) ends.push_back(layers[i]);
  }
  if (ends.empty())
    throw Error(
        TDM_INVALID_ARGUMENT,
        "[features.checkpointing] segments = \"blocks\" needs repeated blocks ([[layers]] op = \"repeat\", "
        "layers named <block>.<i>.<layer>); this model has none: use \"auto\" or a number");
  // Layers after the last block (a final norm, the head) join its segment.
  const std::vector<std::string> tail(std::find(layers.begin(), layers.end(), ends.back()) + 1, layers.end());
  if (!tail.empty()) ends.back() = tail.back();
  return split_after(layers, ends);
}

size_t estimated_peak(const Segments& segments, const std::map<std::string, size_t>& saved,
                      const std::map<std::string, size_t>& outputs) {
  const auto get = [](const std::map<std::string, size_t>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? size_t(0) : it->second;
  };
  size_t kept = 0, largest = 0;
  for (size_t s = 0; s < segments.size(); ++s) {
    size_t all = 0;
    for (const std::string& l : segments[s]) all += get(saved, l);
    if (s + 1 == segments.size()) {
      kept += all;
    } else {
      kept += get(outputs, segments[s].back());
      largest = std::max(largest, all);
    }
  }
  return kept + largest;
}

Segments fit_budget(const std::vector<std::string>& layers, const std::map<std::string, size_t>& saved,
                    const std::map<std::string, size_t>& outputs, size_t budget) {
  Segments best = split_evenly(layers, 1);
  size_t best_peak = estimated_peak(best, saved, outputs);
  if (best_peak <= budget) return best;
  // More segments leave a shorter last segment, so recompute more: the
  // first count that fits recomputes least.
  for (size_t n = 2; n <= layers.size(); ++n) {
    Segments s = split_evenly(layers, n);
    const size_t peak = estimated_peak(s, saved, outputs);
    if (peak <= budget) return s;
    if (peak < best_peak) {
      best = std::move(s);
      best_peak = peak;
    }
  }
  return best;
}

}  // namespace tandem::checkpointing
