// Reference backend — the op registry: every section of sdk/ops.md, each
// registered by its own ops/<stem>.cpp.
#include "ops/common.hpp"

namespace tandem::reference {

const Registry& registry() {
  static const Registry r = [] {
    Registry add("reference");
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
    register_quantize(add);
    register_linear_int8(add);
    register_conv2d_int8(add);
    register_fake_quant(add);
    return add;
  }();
  return r;
}

}  // namespace tandem::reference
