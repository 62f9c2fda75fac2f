// A forward value that backward reads again but that is cheap to make again
// from what stays alive anyway: a ZeRO stage-3 parameter gathered from its
// shards (zero_gathers.hpp), a frozen INT8 base weight dequantized
// (lora_base.hpp). Keeping the forward's copy until backward would hold
// every layer's copy at once, the memory those features exist to save; so
// the nodes that made it run once more, just before its first backward
// reader, and the arena frees each copy after its last reader.
#pragma once

#include <vector>

#include "graph/graph.hpp"

namespace tandem::host {

// `chain`: forward nodes in order, each reading the one before or values
// that live through the step; the last one's first output is the value.
// Backward readers of it read the copy instead. Nothing to do when no
// backward node reads it.
Result<void> make_again_for_backward(Graph& g, const std::vector<NodeId>& chain);

}  // namespace tandem::host
