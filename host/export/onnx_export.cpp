#include "export/onnx_export.hpp"

#include <onnx/checker.h>

#include <exception>
#include <set>

#include "checkpoint/atomic_file.hpp"
#include "exec/tensor_text.hpp"
#include "export/onnx_ops.hpp"
#include "lowering/model_graph.hpp"
#include "ops/op_table.hpp"
#include "ops/shapes.hpp"

namespace tandem::host::exporting {
namespace {

constexpr int64_t kOpset = 17;

// Which dims of each value are the batch: those that differ between the
// graph lowered for batch `a` and the same graph for batch `b`.
Result<std::map<ValueId, std::vector<bool>>> batch_dims(const Graph& a, const Graph& b) {
  std::map<ValueId, std::vector<bool>> out;
  for (size_t i = 0; i < a.value_count(); ++i) {
    const Value& v = *a.value_at(i);
    const Value* w = b.value_by_name(v.name);
    if (w == nullptr || w->type.dims.size() != v.type.dims.size())
      return make_error("value '" + v.name +
                            "' changes rank with the batch size; it cannot be exported with a "
                            "batch dimension",
                        TDM_UNSUPPORTED);
    std::vector<bool>& marks = out[v.id];
    for (size_t d = 0; d < v.type.dims.size(); ++d) marks.push_back(v.type.dims[d] != w->type.dims[d]);
  }
  return out;
}

// The nodes the logits depend on, in schedule order.
std::vector<const Node*> needed_nodes(const Graph& g, ValueId logits) {
  std::set<ValueId> wanted = {logits};
  std::vector<const Node*> nodes;
  for (size_t i = g.node_count(); i-- > 0;) {
    const Node& n = *g.node_at(i);
    bool needed = false;
    for (ValueId o : n.outputs) needed = needed || wanted.count(o) > 0;
    if (!needed) continue;
    nodes.insert(nodes.begin(), &n);
    for (ValueId in : n.inputs)
      if (in != kNoValue) wanted.insert(in);
  }
  return nodes;
}

// A parameter or state tensor from the checkpoint, as an initializer named
// like the value.
Result<void> add_weight(OnnxBuilder& b, onnx::GraphProto& graph, const Value& v,
                        const checkpoint::Checkpoint& weights, const std::string& source) {
  const checkpoint::TensorRecord* t = weights.find(v.name);
  if (t == nullptr)
    return make_error(source + ": has no tensor '" + v.name +
                          "' that this model needs (was it written for "
                          "another model file?)",
                      TDM_INVALID_ARGUMENT);
  if (t->dtype != v.type.dtype || t->shape != v.type.dims)
    return make_error(source + ": tensor '" + v.name + "' is " + ops::dims_str(t->shape) + " (" +
                          exec::dtype_name(t->dtype) + ") but the model needs " + ops::dims_str(v.type.dims) +
                          " (" + exec::dtype_name(v.type.dtype) + ")",
                      TDM_INVALID_ARGUMENT);
  onnx::TensorProto& init = *graph.add_initializer();
  init.set_name(b.name(v.id));
  init.set_data_type(onnx_type(v.type.dtype));
  for (int64_t d : v.type.dims) init.add_dims(d);
  init.set_raw_data(std::string(reinterpret_cast<const char*>(t->data.data()), t->data.size()));
  return {};
}

void add_metadata(onnx::ModelProto& model, const model::ModelSpec& spec, const std::string& source) {
  auto put = [&](const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto& e = *model.add_metadata_props();
    e.set_key(key);
    e.set_value(value);
  };
  auto list = [](const std::vector<double>& values) {
    std::string text;
    for (double v : values) text += (text.empty() ? "" : ",") + std::to_string(v);
    return text;
  };
  put("tandem.model_file", spec.path);
  put("tandem.model_name", spec.name);
  put("tandem.weights", source);
  put("tandem.task", spec.task);
  if (!spec.data.normalize_mean.empty()) put("tandem.normalize_mean", list(spec.data.normalize_mean));
  if (!spec.data.normalize_std.empty()) put("tandem.normalize_std", list(spec.data.normalize_std));
}

Result<onnx::ModelProto> build(const lowering::ModelGraph& model, const Graph& other,
                               const model::ModelSpec& spec, const checkpoint::Checkpoint& weights,
                               const std::string& source) {
  auto marks = batch_dims(model.graph, other);
  if (!marks) return marks.error();
  onnx::ModelProto proto;
  proto.set_ir_version(8);
  proto.set_producer_name("tandem");
  proto.set_producer_version(TANDEM_VERSION);
  proto.add_opset_import()->set_version(kOpset);
  add_metadata(proto, spec, source);
  onnx::GraphProto& graph = *proto.mutable_graph();
  graph.set_name(spec.name.empty() ? "tandem" : spec.name);
  OnnxBuilder b(graph, model.graph, std::move(*marks));
  const std::vector<const Node*> nodes = needed_nodes(model.graph, model.logits);
  std::set<ValueId> produced;
  for (const Node* n : nodes)
    for (ValueId o : n->outputs) produced.insert(o);
  for (const Node* n : nodes)
    for (ValueId in : n->inputs) {
      if (in == kNoValue || produced.count(in) > 0) continue;
      const Value& v = *model.graph.value(in);
      if (v.kind == TDM_VALUE_INPUT) {
        if (in != model.input)
          return make_error("the evaluation graph reads input '" + v.name +
                                "' besides the samples: it cannot be "
                                "exported",
                            TDM_UNSUPPORTED);
        continue;
      }
      if (auto r = add_weight(b, graph, v, weights, source); !r) return r.error();
      produced.insert(in);
    }
  onnx::ValueInfoProto& input = *graph.add_input();
  input.set_name(b.name(model.input));
  b.describe(model.input, *input.mutable_type());
  for (const Node* n : nodes) {
    auto found = converters().find(n->op);
    if (found == converters().end()) {
      const auto why = not_exported().find(n->op);
      return not_exportable(*n, "no ONNX form for op '" + n->op + "'" +
                                    (why != not_exported().end() ? ": " + std::string(why->second) : ""));
    }
    if (auto r = found->second(b, *n); !r) return r.error();
  }
  b.node("Identity", {b.name(model.logits)}, {"logits"}, "output");
  onnx::ValueInfoProto& output = *graph.add_output();
  output.set_name("logits");
  b.describe(model.logits, *output.mutable_type());
  return proto;
}

}  // namespace

Result<OnnxSummary> export_onnx(const model::ModelSpec& spec, const checkpoint::Checkpoint& weights,
                                const std::string& weights_source, const lowering::Int8Plan* int8,
                                const std::string& output) {
  // Two batch sizes tell which dims are the batch (OnnxBuilder).
  auto two = lowering::build_forward(spec, 2, lowering::Mode::Eval, TDM_F32, {}, int8);
  if (!two) return two.error();
  auto three = lowering::build_forward(spec, 3, lowering::Mode::Eval, TDM_F32, {}, int8);
  if (!three) return three.error();
  auto proto = build(*two, three->graph, spec, weights, weights_source);
  if (!proto) return proto.error();
  try {
    onnx::checker::check_model(*proto);
  } catch (const std::exception& e) {
    return make_error(std::string("the ONNX model written for ") + spec.path +
                          " does not pass ONNX's checker (an exporter bug; please report it): " + e.what(),
                      TDM_INTERNAL);
  }
  std::string bytes;
  if (!proto->SerializeToString(&bytes))
    return make_error("cannot serialise the ONNX model (" + std::to_string(proto->ByteSizeLong()) +
                          " bytes; protobuf refuses messages over 2 GiB)",
                      TDM_UNSUPPORTED);
  if (auto r = checkpoint::write_file_atomically(output, {bytes}); !r) return r.error();
  return OnnxSummary{size_t(proto->graph().node_size()), size_t(proto->graph().initializer_size()),
                     bytes.size()};
}

Error not_exportable(const Node& node, const std::string& why) {
  return make_error(
      "cannot export node '" + node.name + "' (layer '" + node.layer + "', " + node.op + ") to ONNX: " + why,
      TDM_UNSUPPORTED);
}

Result<void> activation(OnnxBuilder& b, const Node& node, const std::string& kind, const std::string& from,
                        const std::string& to) {
  static const std::map<std::string, std::string> ops = {
      {"none", "Identity"}, {"relu", "Relu"}, {"tanh", "Tanh"}, {"sigmoid", "Sigmoid"}};
  auto it = ops.find(kind);
  if (it == ops.end()) return not_exportable(node, "activation '" + kind + "'");
  b.node(it->second, {from}, {to}, node.name);
  return {};
}

std::vector<double> floats_attr(const Node& node, const std::string& name) {
  const AttrValue* a = ops::find_attr(node.attrs, name);
  if (a == nullptr) return {};
  if (const auto* list = std::get_if<std::vector<double>>(a)) return *list;
  if (const auto* one = std::get_if<double>(a)) return {*one};
  return {};
}

const std::map<std::string_view, std::string_view>& not_exported() {
  static const std::map<std::string_view, std::string_view> ops = {
      {"softmax_cross_entropy", "the training loss; the exported model ends at the logits"},
      {"count_correct", "a training metric"},
      {"batch_norm_train", "training only; evaluation uses batch_norm_inference"},
      {"dropout", "the identity at evaluation, where it is not emitted"},
      {"fill", "no model-file layer emits it"},
      {"fake_quant", "training only; an INT8 export uses the calibrated quantize and dequantize"},
  };
  return ops;
}

std::vector<std::string> converted_ops() {
  std::vector<std::string> names;
  for (const auto& [name, converter] : converters()) names.push_back(name);
  return names;
}

const ConverterTable& converters() {
  static const ConverterTable table = [] {
    ConverterTable t;
    add_dense_converters(t);
    add_tensor_converters(t);
    add_transformer_converters(t);
    return t;
  }();
  return table;
}

}  // namespace tandem::host::exporting
