// Reverse-mode autodiff over a forward graph: appends the backward ops of
// every op's gradient rule (sdk/ops.md names them), summing the gradients of
// values read more than once. Every parameter ends with a gradient value
// "<parameter>.grad" of kind TDM_VALUE_GRADIENT.
#pragma once

#include "lowering/model_graph.hpp"

namespace tandem::host::lowering {

Result<void> append_backward(ModelGraph& model);

}  // namespace tandem::host::lowering
