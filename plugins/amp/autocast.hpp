// The cast pass: runs the compute-heavy ops of forward and backward in the
// compute dtype (bf16 or f16) and everything else in f32.
#pragma once

#include "graph_edit.hpp"

namespace amp {

struct AutocastReport {
  size_t converted = 0;  // nodes now running in the compute dtype
  size_t casts = 0;      // cast nodes left in the graph
  size_t wide = 0;       // products reading compute-dtype operands into f32
};

// Rewrites every forward and backward node whose op is on the low-precision
// list (autocast.cpp) into the same op on compute-dtype tensors, with casts
// at the borders to f32 ops. Parameters stay f32 (master weights).
// `wide_products`: the products kept in f32 read compute-dtype operands;
// those making a parameter gradient only with `wide_gradients` (not under
// loss scaling, which unscales a gradient's inputs in f32).
AutocastReport autocast(GraphEdit& graph, tdm_dtype dtype, bool wide_products, bool wide_gradients);

}  // namespace amp
