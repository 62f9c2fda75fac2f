// Internal to the graph builder: `linear` and `conv2d` layers emitted in INT8.
#pragma once

#include "lowering/int8_plan.hpp"
#include "lowering/model_graph_layers.hpp"

namespace tandem::host::lowering::detail {

// `x` is the flattened [batch, in] input.
Result<ValueId> linear_int8(Context& ctx, ValueId x, const Int8Layer& q);
// `conv_attrs`: conv2d's geometry attributes; `w_dims`, `y_dims`: the
// filter and output shapes conv2d would have.
Result<ValueId> conv2d_int8(Context& ctx, ValueId x, const Int8Layer& q, std::vector<Attr> conv_attrs,
                            const Dims& w_dims, const Dims& y_dims);

}  // namespace tandem::host::lowering::detail
