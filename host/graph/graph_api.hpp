// The tdm_graph_api adapter over a host Graph (sdk/include/tandem/graph.h).
//
// A tdm_graph* handed to a feature pass is a Graph*. Strings and arrays
// returned through out parameters point into the Graph and stay valid until
// its next modification. Refusals return TDM_INVALID_ARGUMENT / TDM_NOT_FOUND
// and record the reason in the caller's thread-local error slot (source
// "graph"), which the host shows with the pass's plugin name.
#pragma once

#include "graph/graph.hpp"
#include "tandem/graph.h"

namespace tandem::host {

const tdm_graph_api* graph_api_table();

inline tdm_graph* to_c(Graph& graph) noexcept {
  return reinterpret_cast<tdm_graph*>(&graph);
}
inline const tdm_graph* to_c(const Graph& graph) noexcept {
  return reinterpret_cast<const tdm_graph*>(&graph);
}

// Converts a C attribute to an owned one; an error names the bad field.
Result<Attr> attr_from_c(const tdm_attr& attr);

}  // namespace tandem::host
