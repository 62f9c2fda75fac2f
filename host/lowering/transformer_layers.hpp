// Internal to the graph builder: the layers of transformer models (a
// language model's [batch, context, features] activations), lowered to
// catalog ops — attention, rms_norm, position_embedding — and the
// per-token reshapes the linear layer uses there.
#pragma once

#include <string>

#include "lowering/model_graph_layers.hpp"

namespace tandem::host::lowering::detail {

// [B, T, C] -> [B·T, C] (a reshape named `node_name`), so a linear layer acts
// on each token; back_to_tokens undoes it for the layer's output.
Result<ValueId> token_rows(Context& ctx, ValueId x, const std::string& node_name);
Result<ValueId> back_to_tokens(Context& ctx, ValueId rows, int64_t batch, int64_t context,
                               const std::string& node_name);

Result<ValueId> rms_norm(Context& ctx, ValueId x);
Result<ValueId> position_embedding(Context& ctx, ValueId x);
Result<ValueId> attention(Context& ctx, ValueId x);

}  // namespace tandem::host::lowering::detail
