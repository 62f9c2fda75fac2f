#include "export/torch_weights.hpp"

#include <cstring>

#include "checkpoint/torch_names.hpp"
#include "lowering/model_graph.hpp"
#include "ops/shapes.hpp"

namespace tandem::host::exporting {

Result<size_t> export_torch_weights(const model::ModelSpec& spec, const checkpoint::Checkpoint& weights,
                                    const std::string& weights_source, const std::string& output) {
  if (weights.metadata.count("tandem.quantized") > 0)
    return make_error(weights_source +
                          " is an INT8 checkpoint: PyTorch's modules take the f32 weights; export "
                          "the checkpoint it was quantized from",
                      TDM_INVALID_ARGUMENT);
  auto model = lowering::build_forward(spec, 1, lowering::Mode::Eval);
  if (!model) return model.error();
  checkpoint::Checkpoint out;
  out.metadata = {{"format", "pt"}, {"tandem.model_file", spec.path}, {"tandem.weights", weights_source}};
  // PyTorch counts a batch norm's training batches; the checkpoint's step is
  // that count for a run of one process.
  int64_t batches = 0;
  if (auto step = weights.metadata.find("tandem.step"); step != weights.metadata.end())
    batches = std::strtoll(step->second.c_str(), nullptr, 10);
  const Graph& g = model->graph;
  for (size_t i = 0; i < g.value_count(); ++i) {
    const Value& v = *g.value_at(i);
    if (v.kind != TDM_VALUE_PARAMETER && v.kind != TDM_VALUE_STATE) continue;
    const checkpoint::TensorRecord* t = weights.find(v.name);
    if (t == nullptr || t->shape != v.type.dims || t->dtype != v.type.dtype)
      return make_error(weights_source + ": has no tensor '" + v.name + "' of " + ops::dims_str(v.type.dims) +
                            " that this model needs (was it written for another model file?)",
                        TDM_INVALID_ARGUMENT);
    checkpoint::TensorRecord copy = *t;
    copy.name = checkpoint::torch_name(v.name);
    out.tensors.push_back(std::move(copy));
    const std::string running = ".running_mean";
    if (v.name.size() > running.size() &&
        v.name.compare(v.name.size() - running.size(), running.size(), running) == 0) {
      checkpoint::TensorRecord tracked{
          v.name.substr(0, v.name.size() - running.size()) + ".num_batches_tracked",
          TDM_S64,
          {},
          std::vector<std::byte>(sizeof batches)};
      std::memcpy(tracked.data.data(), &batches, sizeof batches);
      out.tensors.push_back(std::move(tracked));
    }
  }
  if (auto r = checkpoint::write_safetensors(output, out); !r) return r.error();
  return out.tensors.size();
}

}  // namespace tandem::host::exporting
