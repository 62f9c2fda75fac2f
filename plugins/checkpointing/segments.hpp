// checkpointing — which layers form the recompute segments.
//
// Forward layers are split into contiguous segments. The output of each
// segment's last layer is kept (the "checkpoint"); everything else a segment
// computes for backward is freed after forward and recomputed from the
// previous checkpoint when backward reaches the segment. The last segment is
// never recomputed: its backward starts right after its forward.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "graph_snapshot.hpp"

namespace tandem::checkpointing {

using Segments = std::vector<std::vector<std::string>>;  // layer names, forward order

// Layers with forward nodes, in forward order (the loss excluded).
std::vector<std::string> forward_layers(const GraphCopy& graph);
// Bytes of each layer's forward outputs that backward reads.
std::map<std::string, size_t> saved_bytes(const GraphCopy& graph);
// Bytes of the output of each layer's last forward node.
std::map<std::string, size_t> output_bytes(const GraphCopy& graph);

// `n` segments of (nearly) equal numbers of layers.
Segments split_evenly(const std::vector<std::string>& layers, size_t n);
// A segment ends after each named layer; unknown names are an error naming them.
Segments split_after(const std::vector<std::string>& layers, const std::vector<std::string>& ends);

// One segment per copy of a repeat block ("h.0.*", "h.1.*", ...): layers
// before the first copy join it, layers after the last join the last.
Segments split_by_blocks(const std::vector<std::string>& layers);

// Activations kept at backward's start with these segments (an estimate
// from the layers' saved and output bytes): the checkpoints, the last
// segment's activations, and the largest recomputed segment's.
size_t estimated_peak(const Segments& segments, const std::map<std::string, size_t>& saved,
                      const std::map<std::string, size_t>& outputs);
// The segmentation with the least recomputation whose estimate fits
// `budget` (one segment, nothing recomputed, when everything fits); when
// none fits, the one with the lowest estimate.
Segments fit_budget(const std::vector<std::string>& layers, const std::map<std::string, size_t>& saved,
                    const std::map<std::string, size_t>& outputs, size_t budget);

}  // namespace tandem::checkpointing
