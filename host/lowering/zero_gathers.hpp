// ZeRO stage 3 (lowering/optimizer.hpp): every parameter is a shard, and a
// layer reads the whole tensor gathered from the ranks just before its
// forward (model_graph_layers.hpp, Context::parameter). Its backward reads
// it again, so after autodiff each gathered parameter that backward reads
// is gathered once more, just before its first backward reader
// (again_for_backward.hpp).
#pragma once

#include "lowering/model_graph.hpp"

namespace tandem::host::lowering {

Result<void> gather_again_for_backward(ModelGraph& model);

}  // namespace tandem::host::lowering
