// Tensor names as PyTorch's state_dict gives them, for moving weights between
// Tandem and PyTorch (`tandem export --format safetensors`, and
// `tandem train --init-from` of such a file).
//
// For a PyTorch module whose submodules carry the model file's layer names
// (`self.fc1 = nn.Linear(...)`, a repeat block as `nn.ModuleList`, so its
// copies are "<block>.<i>.<layer>"), the tensors correspond one to one and
// have the same layouts (linear [out, in], conv2d [out, in/groups, kh, kw],
// embedding [vocabulary, width]). Only the norms' parameters are named
// differently:
//   <layer>.gamma -> <layer>.weight     (batch_norm, layer_norm, rms_norm)
//   <layer>.beta  -> <layer>.bias
// and a batch_norm layer's state gains PyTorch's <layer>.num_batches_tracked
// (int64, not read back). An attention layer's projections are
// <layer>.q.weight, .k.weight, .v.weight, .out.weight (and .bias): a module
// with four nn.Linear of those names (not nn.MultiheadAttention, which packs
// q, k and v into one in_proj_weight).
#pragma once

#include <string>

namespace tandem::host::checkpoint {

// The PyTorch name of the Tandem tensor `name`. Reading weights, a tensor
// not found under its Tandem name is looked up under this one.
std::string torch_name(const std::string& name);

}  // namespace tandem::host::checkpoint
