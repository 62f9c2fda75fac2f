// checkpointing — the graph rewrite: for every segment but the last, the
// forward nodes whose outputs backward reads are cloned into the backward
// phase, right before the first backward node that needs them, and those
// backward nodes read the clones. The originals are then read by forward
// only, so the executor's liveness planning frees them after forward; the
// clones live only while their segment's backward runs.
//
// Clones are the same ops with the same attributes and inputs (dropout's
// seed and per-step seed_offset included), so they recompute bit for bit
// what forward computed. Nodes that change state in place (batch_norm_train,
// "tandem.inplace" nodes) or talk to other ranks (comm.*) are never cloned:
// their outputs are kept.
#pragma once

#include <cstddef>

#include "graph_snapshot.hpp"
#include "segments.hpp"

namespace tandem::checkpointing {

struct RewriteStats {
  size_t recomputed_segments = 0;
  size_t cloned_nodes = 0;
  size_t freed_bytes = 0;  // forward outputs backward no longer reads
};

RewriteStats recompute(GraphEdit& graph, const GraphCopy& copy, const Segments& segments);

}  // namespace tandem::checkpointing
