// CUDA backend — the op registry: every section of sdk/ops.md this backend
// implements, each registered by its own ops/<stem>.cu or .cpp.
#include "cuda_common.hpp"

namespace tandem::cuda {

const Registry& registry() {
  static const Registry r = [] {
    Registry add("cuda");
    register_matmul(add);
    register_linear(add);
    register_conv2d(add);
    register_pooling(add);
    register_activation(add);
    register_softmax(add);
    register_softmax_cross_entropy(add);
    register_layer_norm(add);
    register_batch_norm(add);
    register_embedding(add);
    register_dropout(add);
    register_elementwise(add);
    register_reduce(add);
    register_tensor(add);
    register_cast(add);
    register_sgd_update(add);
    register_adamw_update(add);
    return add;
  }();
  return r;
}

}  // namespace tandem::cuda
