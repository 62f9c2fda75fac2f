// ZeRO stage 3 (lowering/optimizer.hpp): every parameter is a shard, and a
// layer reads the whole tensor gathered from the ranks just before its
// forward (model_graph_layers.hpp, Context::parameter). Its backward reads
// it again; keeping the forward's gathered copy until then would hold every
// layer's whole parameters at once, the memory stage 3 exists to save. So
// after autodiff each gathered parameter that backward reads is gathered
// once more, just before its first backward reader, and the arena frees
// each copy after its last reader.
#pragma once

#include "lowering/model_graph.hpp"

namespace tandem::host::lowering {

Result<void> gather_again_for_backward(ModelGraph& model);

}  // namespace tandem::host::lowering
