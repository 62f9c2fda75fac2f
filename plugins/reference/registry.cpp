// Reference backend — op registry.
#include "registry.hpp"

namespace tandem::reference {

Registry::Registry() {
  const Registrar add = [this](const char* name, Factory factory) { factories_[name] = factory; };
  register_matmul_linear(add);
  register_conv(add);
  register_pool(add);
  register_activation(add);
  register_softmax_loss(add);
  register_norm(add);
  register_embedding(add);
  register_dropout(add);
  register_elementwise(add);
  register_reduce(add);
  register_shape(add);
  register_cast(add);
  register_optimizer(add);
  register_quantize(add);
}

const Registry& Registry::instance() {
  static const Registry registry;
  return registry;
}

std::unique_ptr<Kernel> Registry::prepare(const OpView& op, size_t& workspace) const {
  workspace = 0;  // reference kernels keep their scratch in ordinary vectors
  const auto it = factories_.find(op.op());
  if (it == factories_.end()) throw Unsupported("reference: op '" + op.op() + "' is not in the catalog");
  if (op.version() > 1)
    throw Unsupported("reference: op '" + op.op() + "' version " + std::to_string(op.version()) +
                      " is newer than the catalog version 1 this plugin implements");
  // Shapes are checked once here so no factory has to fear a negative dim.
  auto check_dims = [&](const std::vector<TensorShape>& tensors, const char* kind) {
    for (size_t i = 0; i < tensors.size(); ++i)
      for (int64_t d : tensors[i].dims)
        if (d < 0)
          Check(op).fail(std::string(kind) + " " + std::to_string(i) + " has a negative dimension " +
                         shape_str(tensors[i]));
  };
  check_dims(op.inputs(), "input");
  check_dims(op.outputs(), "output");
  return it->second(op, workspace);
}

}  // namespace tandem::reference
