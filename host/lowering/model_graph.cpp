#include "lowering/model_graph.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "data/counter_rng.hpp"
#include "lowering/lora.hpp"
#include "lowering/model_graph_layers.hpp"
#include "ops/op_table.hpp"

namespace tandem::host::lowering {
namespace detail {

Result<std::vector<ValueId>> Context::emit(const std::string& op, const std::string& node_name,
                                           std::vector<ValueId> inputs, std::vector<Attr> attrs,
                                           std::vector<TensorType> outputs,
                                           std::vector<std::string> output_names) {
  // The outputs worked out here must be what the op table's shape rule
  // gives: a disagreement is a bug in lowering, caught before any backend.
  if (auto checked = ops::check_outputs(out.graph, op, inputs, attrs, outputs); !checked)
    return make_error("layer '" + layer->name + "' (node '" + node_name + "'): " + checked.error().message +
                          " (internal: lowering and the op table disagree)",
                      TDM_INTERNAL);
  NodeSpec spec;
  spec.op = op;
  spec.name = node_name;
  spec.layer = layer->name;
  spec.phase = TDM_PHASE_FORWARD;
  spec.attrs = std::move(attrs);
  spec.inputs = std::move(inputs);
  spec.outputs = std::move(outputs);
  spec.output_names = std::move(output_names);
  auto id = out.graph.insert_node(std::move(spec));
  if (!id) return id.error();
  if (layer->device) {
    if (auto r = out.graph.set_device(*id, *layer->device); !r) return r.error();
  }
  return out.graph.node(*id)->outputs;
}

Result<ValueId> Context::sharded_parameter(const std::string& suffix, Dims full, int axis, Initializer init) {
  const TensorParallel& tp = out.tensor_parallel;
  Dims local = full;
  local[static_cast<size_t>(axis)] /= tp.size;
  auto id = parameter(suffix, local, init);
  if (!id) return id;
  // The stored parameter (with ZeRO stage 3, *id is its gathered whole).
  if (tp.size > 1) out.shards[out.parameters.back()] = Shard{axis, std::move(full)};
  return id;
}

Result<ValueId> Context::parameter(const std::string& suffix, Dims dims, Initializer init) {
  const bool shard = out.zero.shards_parameters() && out.mode != Mode::Decode;
  const Dims stored = shard ? Dims{zero_shard_elements(numel(dims), out.zero.world)} : dims;
  auto id =
      out.graph.add_value(layer->name + "." + suffix, TDM_VALUE_PARAMETER, TensorType{out.dtype, stored});
  if (!id) return id.error();
  out.parameters.push_back(*id);
  if (!layer->trainable || spec.lora.enabled) out.frozen.insert(*id);  // lora.cpp unfreezes the adapters
  out.initializers[*id] = init;
  if (!shard) return id;
  out.zero.parameters[*id] = dims;
  return gathered(*id);
}

Result<ValueId> Context::gathered(ValueId shard) {
  auto whole = out.zero.parameters.find(shard);
  if (whole == out.zero.parameters.end()) return shard;
  const std::string name = out.graph.value(shard)->name;
  const std::string node = out.graph.node_by_name(name + ".zero_all_gather") == nullptr
                               ? name + ".zero_all_gather"
                               : layer->name + "." + name + ".zero_all_gather";
  auto y = emit(ops::kZeroAllGather, node, {shard}, {}, {TensorType{out.dtype, whole->second}});
  if (!y) return y.error();
  return (*y)[0];
}

Result<ValueId> Context::state(const std::string& suffix, Dims dims, double fill) {
  auto id = out.graph.add_state(layer->name + "." + suffix, TensorType{out.dtype, std::move(dims)}, fill);
  if (!id) return id.error();
  out.initializers[*id] = Initializer{fill == 1.0 ? "ones" : "zeros"};
  return id;
}

int64_t Context::dropout_seed(bool on_slice) const {
  const uint64_t seed = data::random_u64(spec.train.seed, 0xD80, out.dropout_nodes.size());
  const TensorParallel& tp = out.tensor_parallel;
  if (!on_slice || tp.size == 1) return static_cast<int64_t>(seed >> 1);
  return static_cast<int64_t>(data::random_u64(seed, 0xD81, static_cast<uint64_t>(tp.rank)) >> 1);
}

Result<ValueId> Context::dropout_step() {
  if (out.dropout_step == kNoValue) {
    auto step = out.graph.add_state("dropout.step", TensorType{TDM_S64, {}}, 0.0);
    if (!step) return step.error();
    out.dropout_step = *step;
  }
  return out.dropout_step;
}

}  // namespace detail

namespace {

// The layers feeding `layer`: its `inputs`, or the previous layer.
Result<std::vector<ValueId>> resolve_inputs(const detail::Context& ctx,
                                            const std::map<std::string, ValueId>& outputs, ValueId previous) {
  if (ctx.layer->inputs.empty()) return std::vector<ValueId>{previous};
  std::vector<ValueId> ids;
  for (const auto& name : ctx.layer->inputs) {
    auto it = outputs.find(name);
    if (it == outputs.end())
      return ctx.error("input '" + name +
                       "' is not an earlier layer (or \"input\"); layers may only read layers " +
                       "written above them");
    ids.push_back(it->second);
  }
  return ids;
}

// Node `op` of layer "loss" with one output, which it returns.
Result<ValueId> loss_node(ModelGraph& g, const std::string& op, const std::string& name,
                          std::vector<ValueId> inputs, TensorType out, std::vector<Attr> attrs = {}) {
  NodeSpec n;
  n.op = op;
  n.name = name;
  n.layer = "loss";
  n.attrs = std::move(attrs);
  n.inputs = std::move(inputs);
  n.outputs = {std::move(out)};
  auto id = g.graph.insert_node(std::move(n));
  if (!id) return id.error();
  return g.graph.node(*id)->outputs[0];
}

// A language model's loss: the logits [B, T, V] and the next tokens [B, T]
// as [B·T, V] and [B·T] (reshapes move no bytes), so softmax_cross_entropy's
// mean is the mean over tokens.
Result<std::pair<ValueId, ValueId>> token_rows(ModelGraph& g, const model::ModelSpec& spec, ValueId logits) {
  const Dims dims = g.graph.value(logits)->type.dims;
  const std::string last = g.graph.value(logits)->name;
  if (dims.size() != 3 || dims[2] != spec.classes)
    return make_error(spec.path + ": the last layer '" + last + "' gives " + dims_str(dims) +
                          ", but a language model needs logits [batch, context, vocab_size = " +
                          std::to_string(spec.classes) + "]: end the model with a linear layer of " +
                          std::to_string(spec.classes) + " out_features",
                      TDM_INVALID_ARGUMENT);
  const int64_t rows = dims[0] * dims[1];
  auto scores = loss_node(g, "reshape", "loss.logits", {logits},
                          TensorType{g.graph.value(logits)->type.dtype, {rows, dims[2]}});
  if (!scores) return scores.error();
  auto labels = loss_node(g, "reshape", "loss.labels", {g.labels},
                          TensorType{g.graph.value(g.labels)->type.dtype, {rows}});
  if (!labels) return labels.error();
  return std::pair<ValueId, ValueId>{*scores, *labels};
}

Result<void> add_loss(ModelGraph& g, const model::ModelSpec& spec, ValueId logits) {
  ValueId labels = g.labels, scores = logits;
  if (spec.language_model()) {
    auto rows = token_rows(g, spec, logits);
    if (!rows) return rows.error();
    std::tie(scores, labels) = *rows;
  }
  const auto& dims = g.graph.value(scores)->type.dims;
  const std::string last = g.graph.value(logits)->name;
  if (dims.size() != 2)
    return make_error(spec.path + ": the last layer '" + last + "' gives " + dims_str(dims) + ", but " +
                          spec.loss.op + " needs logits [batch, classes]: end the model with a linear layer",
                      TDM_INVALID_ARGUMENT);
  if (spec.classes > 0 && dims[1] != spec.classes)
    return make_error(spec.path + ": the last layer '" + last + "' has " + std::to_string(dims[1]) +
                          " outputs but [model] classes = " + std::to_string(spec.classes),
                      TDM_INVALID_ARGUMENT);
  NodeSpec loss;
  loss.op = spec.loss.op;
  loss.name = "loss";
  loss.layer = "loss";
  loss.attrs = {{"reduction", std::string("mean")}, {"label_smoothing", spec.loss.label_smoothing}};
  loss.inputs = {scores, labels};
  loss.outputs = {TensorType{g.dtype, {}}};
  loss.output_names = {"loss"};
  auto id = g.graph.insert_node(std::move(loss));
  if (!id) return id.error();
  g.logits = logits;
  g.loss = g.graph.node(*id)->outputs[0];
  return {};
}

// correct = count_correct(logits, labels), the rows predicted right.
Result<void> add_correct(ModelGraph& g) {
  const Node& loss = *g.graph.node(g.graph.value(g.loss)->producer);
  const ValueId scores = loss.inputs[0], labels = loss.inputs[1];
  auto correct = loss_node(g, "count_correct", "loss.correct", {scores, labels}, TensorType{TDM_F32, {}});
  if (!correct) return correct.error();
  g.correct = *correct;
  return {};
}

// stats += [loss, correct] after every micro-batch, in place: the trainer
// reads the two sums at its log interval instead of the loss and the whole
// logits tensor after every micro-batch.
Result<void> add_train_stats(ModelGraph& g) {
  auto loss_1 = loss_node(g, "reshape", "loss.stats.loss", {g.loss}, TensorType{TDM_F32, {1}});
  auto correct_1 = loss_node(g, "reshape", "loss.stats.correct", {g.correct}, TensorType{TDM_F32, {1}});
  if (!loss_1) return loss_1.error();
  if (!correct_1) return correct_1.error();
  auto step = loss_node(g, "concat", "loss.stats.step", {*loss_1, *correct_1}, TensorType{TDM_F32, {2}},
                        {{"axis", int64_t{0}}});
  if (!step) return step.error();
  auto stats = g.graph.add_state(kTrainStatsName, TensorType{TDM_F32, {2}}, 0.0);
  if (!stats) return stats.error();
  auto sum = loss_node(g, "add", "loss.stats.add", {*stats, *step}, TensorType{TDM_F32, {2}});
  if (!sum) return sum.error();
  if (auto r = g.graph.annotate(g.graph.value(*sum)->producer, "tandem.inplace", std::string("0:0")); !r)
    return r;
  g.train_stats = *stats;
  return {};
}

Result<void> add_decode_inputs(ModelGraph& g, const model::ModelSpec& spec) {
  const int64_t context = spec.input_shape.at(0);
  auto position = g.graph.add_value("decode.position", TDM_VALUE_INPUT, TensorType{TDM_S64, {}});
  auto index = g.graph.add_value("decode.position_index", TDM_VALUE_INPUT, TensorType{TDM_S32, {1}});
  auto mask = g.graph.add_value("decode.mask", TDM_VALUE_INPUT, TensorType{TDM_U8, {1, context}});
  if (!position) return position.error();
  if (!index) return index.error();
  if (!mask) return mask.error();
  g.decode_position = *position;
  g.decode_position_index = *index;
  g.decode_mask = *mask;
  return {};
}

}  // namespace

std::vector<std::string> training_reads(const ModelGraph& m) {
  std::vector<std::string> reads = {m.graph.value(m.loss)->name};
  if (m.train_stats == kNoValue) reads.push_back(m.graph.value(m.logits)->name);
  return reads;
}

bool uses_tensor_parallelism(const model::ModelSpec& spec) {
  for (const auto& layer : spec.layers)
    if (layer.string_attr("parallel", "none") != "none") return true;
  return false;
}

Result<void> check_backend_for(const model::ModelSpec& spec, const std::string& backend, uint32_t abi_minor,
                               bool tensor_parallel) {
  const bool vocab =
      tensor_parallel && std::any_of(spec.layers.begin(), spec.layers.end(), [](const model::LayerSpec& l) {
        return l.op == "embedding" && l.string_attr("parallel", "none") == "vocab";
      });
  if (vocab && abi_minor < 3)
    return make_error("vocabulary-parallel embeddings need a backend built against SDK 1.3 or newer; " +
                          backend + " speaks ABI 1." + std::to_string(abi_minor) + ": update the plugin",
                      TDM_UNSUPPORTED);
  for (const auto& l : spec.layers)
    if (l.string_attr("rope_scaling", "none") != "none" && abi_minor < kRopeScalingMinor)
      return make_error("layer '" + l.name +
                            "': rope_scaling needs a backend built against SDK 1.15 or newer; " + backend +
                            " speaks ABI 1." + std::to_string(abi_minor) + ": update the plugin",
                        TDM_UNSUPPORTED);
  return {};
}

Result<ModelGraph> build_forward(const model::ModelSpec& spec, int64_t batch, Mode mode, tdm_dtype dtype,
                                 TensorParallel tp, const Int8Plan* int8, uint32_t backend_abi_minor,
                                 ZeroSharding zero) {
  ModelGraph g;
  g.tensor_parallel = tp;
  g.zero = std::move(zero);
  g.attention_tokens_first = backend_abi_minor >= kAttentionLayoutMinor;
  g.gradient_addends = backend_abi_minor >= kGradientAddendMinor;
  g.mode = mode;
  g.dtype = dtype;
  g.batch = batch;
  Dims input_dims = {batch};
  input_dims.insert(input_dims.end(), spec.input_shape.begin(), spec.input_shape.end());
  if (mode == Mode::Decode) {
    if (!spec.language_model() || batch != 1)
      return make_error(spec.path + ": only a language model decodes, one sequence at a time",
                        TDM_INVALID_ARGUMENT);
    input_dims = {1, 1};
    if (auto r = add_decode_inputs(g, spec); !r) return r.error();
  }
  // A language model reads token ids and predicts one label per position.
  const bool tokens = spec.language_model();
  auto input = g.graph.add_value("input", TDM_VALUE_INPUT, TensorType{tokens ? TDM_S32 : dtype, input_dims});
  auto labels =
      g.graph.add_value("labels", TDM_VALUE_INPUT, TensorType{TDM_S32, tokens ? input_dims : Dims{batch}});
  if (!input) return input.error();
  if (!labels) return labels.error();
  g.input = *input;
  g.labels = *labels;

  std::map<std::string, ValueId> outputs = {{"input", g.input}};
  ValueId previous = g.input;
  for (const auto& layer : spec.layers) {
    detail::Context ctx{g, spec, &layer, int8};
    auto inputs = resolve_inputs(ctx, outputs, previous);
    if (!inputs) return inputs.error();
    auto out = detail::expand_layer(ctx, *inputs);
    if (!out) return out.error();
    outputs[layer.name] = *out;
    previous = *out;
  }
  if (auto r = detail::check_lora_targets(g, spec); !r) return r.error();
  if (const auto it = g.split_activations.find(previous); it != g.split_activations.end())
    return make_error(spec.path + ": the last layer '" + g.graph.value(previous)->name +
                          "' gives this rank's slice only (a column-parallel linear with gather_output = "
                          "false needs a row-parallel linear after it, or gather_output = true)",
                      TDM_INVALID_ARGUMENT);
  if (auto r = add_loss(g, spec, previous); !r) return r.error();
  if (mode != Mode::Decode && spec.loss.op == "softmax_cross_entropy" && g.dtype == TDM_F32 &&
      backend_abi_minor >= kDeviceStatsMinor) {
    if (auto r = add_correct(g); !r) return r.error();
    if (mode == Mode::Train)
      if (auto r = add_train_stats(g); !r) return r.error();
  }
  return g;
}

}  // namespace tandem::host::lowering
