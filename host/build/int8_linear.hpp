// Internal to the graph builder: a `linear` layer emitted in INT8.
#pragma once

#include "build/int8_plan.hpp"
#include "build/model_graph_layers.hpp"

namespace tandem::host::build::detail {

// `x` is the flattened [batch, in] input.
Result<ValueId> linear_int8(Context& ctx, ValueId x, const Int8Layer& q);

}  // namespace tandem::host::build::detail
