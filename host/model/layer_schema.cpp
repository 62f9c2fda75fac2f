#include "model/layer_schema.hpp"

#include "tandem/op_catalog.hpp"

namespace tandem::host::model {
namespace {

const std::vector<std::string> kInits = {"kaiming",        "kaiming_uniform", "xavier",
                                         "xavier_uniform", "normal",          "zeros"};
const std::vector<std::string> kActivations = {"none", "relu", "tanh", "sigmoid"};

AttrSchema init_attr(const std::string& key) {
  return {key, AttrKind::String, kInits};
}

const AttrRange kAtLeast1{1, std::numeric_limits<double>::infinity(), false, "at least 1"};
const AttrRange kAtLeast0{0, std::numeric_limits<double>::infinity(), false, "0 or more"};
const AttrRange kPositive{0, std::numeric_limits<double>::infinity(), true, "positive"};
const AttrRange kProbability{0, 1, false, "in [0, 1]"};

const AttrSchema bias{"bias", AttrKind::Bool};
const AttrSchema activation{"activation", AttrKind::String, kActivations};
const AttrSchema kernel{"kernel", AttrKind::IntOrInts, {}, true, kAtLeast1};
const AttrSchema stride{"stride", AttrKind::IntOrInts, {}, false, kAtLeast1};
const AttrSchema padding{"padding", AttrKind::IntOrInts, {}, false, kAtLeast0};
const AttrSchema epsilon{"epsilon", AttrKind::Float, {}, false, kPositive};
const AttrSchema init_std{"init_std", AttrKind::Float, {}, false, kPositive};

// Layers with weights over features or pixels, and pooling.
std::vector<LayerSchema> dense_layers() {
  return {
      {"linear",
       "y = act(x W^T + b); x is flattened to [batch, features] first",
       {{"out_features", AttrKind::Int, {}, true, kAtLeast1},
        bias,
        activation,
        init_attr("init"),
        init_attr("bias_init"),
        init_std,
        // Tensor parallelism (Megatron-LM): the weight split by output rows
        // (column) or input columns (row) over the ranks of the run.
        {"parallel", AttrKind::String, {"none", "column", "row"}},
        {"gather_output", AttrKind::Bool},
        // Share an embedding layer's table as this layer's weight (GPT-2's
        // output head): out_features = its rows, input features = its width.
        {"tie_weight", AttrKind::String}}},
      {"conv2d",
       "2-D convolution over NCHW",
       {{"out_channels", AttrKind::Int, {}, true, kAtLeast1},
        kernel,
        stride,
        padding,
        {"dilation", AttrKind::IntOrInts, {}, false, kAtLeast1},
        {"groups", AttrKind::Int, {}, false, kAtLeast1},
        bias,
        init_attr("init"),
        init_attr("bias_init"),
        {"init_std", AttrKind::Float}}},
      {"max_pool2d", "max pooling over NCHW", {kernel, stride, padding}},
      {"avg_pool2d",
       "average pooling over NCHW",
       {kernel, stride, padding, {"count_include_pad", AttrKind::Bool}}},
  };
}

// An activation of the catalog is a layer of the same name whose keys are
// the op's attributes, with the catalog's types and valid values.
LayerSchema activation_layer(const catalog::Op& op) {
  LayerSchema schema{op.name, std::string(op.entry->summary), {}};
  for (const catalog::Attribute& a : op.attrs) {
    AttrSchema key{a.name, AttrKind::Float};
    if (a.type == TDM_ATTR_INT) key.kind = AttrKind::Int;
    if (a.type == TDM_ATTR_STRING) key.kind = AttrKind::String;
    if (a.type == TDM_ATTR_INTS) key.kind = AttrKind::IntOrInts;
    if (a.type == TDM_ATTR_FLOATS) key.kind = AttrKind::Floats;
    key.choices = a.choices;
    key.required = a.kind == catalog::Attribute::Default::required;
    key.range = {a.lo, a.hi, a.lo_open, a.constraint_text.empty() ? "" : catalog::detail::range_text(a),
                 a.hi_open};
    schema.attrs.push_back(key);
  }
  return schema;
}

// Activations, normalisations and reshapes: one input, no mixing of samples.
std::vector<LayerSchema> pointwise_layers() {
  std::vector<LayerSchema> layers;
  for (const catalog::Op& op : catalog::ops())
    if (op.section == "activation" && !op.is(TDM_OP_GRADIENT)) layers.push_back(activation_layer(op));
  for (LayerSchema& other : std::vector<LayerSchema>{
           {"flatten", "[N, ...] -> [N, prod(...)]", {}},
           {"dropout",
            "zeroes elements with probability p during training",
            {{"p", AttrKind::Float, {}, false, kProbability}}},
           {"batch_norm",
            "batch normalisation over the channel dim (dim 1)",
            {epsilon, {"momentum", AttrKind::Float, {}, false, kProbability}}},
           {"layer_norm", "normalisation over the last dim", {epsilon}},
           {"rms_norm", "root-mean-square normalisation over the last dim (Llama)", {epsilon}}})
    layers.push_back(std::move(other));
  return layers;
}

// The layers of language models: token and position embeddings, attention.
std::vector<LayerSchema> sequence_layers() {
  return {
      {"position_embedding",
       "adds a learned vector per position to token vectors [batch, context, features] (GPT-2)",
       {{"max_positions", AttrKind::Int, {}, false, kAtLeast1}, init_attr("init"), init_std}},
      {"attention",
       "multi-head self-attention over token vectors [batch, context, features], with its q/k/v and "
       "output projections",
       {{"heads", AttrKind::Int, {}, true, kAtLeast1},
        {"kv_heads", AttrKind::Int, {}, false, kAtLeast1},
        {"head_dim", AttrKind::Int, {}, false, kAtLeast1},
        {"causal", AttrKind::Bool},
        {"dropout", AttrKind::Float, {}, false, kProbability},
        {"rope", AttrKind::Bool},
        {"rope_base", AttrKind::Float, {}, false, kPositive},
        // Llama 3.1's long-context rope (sdk/ops.md "rope", scaling llama3).
        {"rope_scaling", AttrKind::String, {"none", "llama3"}},
        {"rope_factor", AttrKind::Float, {}, false, kPositive},
        {"rope_low_freq_factor", AttrKind::Float, {}, false, kPositive},
        {"rope_high_freq_factor", AttrKind::Float, {}, false, kPositive},
        {"rope_original_context", AttrKind::Int, {}, false, kAtLeast1},
        // Tensor parallelism (Megatron-LM): each rank holds heads/N query
        // heads and kv_heads/N key/value heads, the output projection row-parallel.
        {"parallel", AttrKind::String, {"none", "heads"}},
        bias,
        // The output projection's bias when it differs from q/k/v's (Qwen2: none).
        {"out_bias", AttrKind::Bool},
        init_attr("init"),
        init_std}},
      {"embedding",
       "row lookup: integer indices -> vectors",
       {{"num_embeddings", AttrKind::Int, {}, true, kAtLeast1},
        {"embedding_dim", AttrKind::Int, {}, true, kAtLeast1},
        {"padding_idx",
         AttrKind::Int,
         {},
         false,
         {-1, std::numeric_limits<double>::infinity(), false, "-1 (none) or a row"}},
        {"parallel", AttrKind::String, {"none", "vocab"}},
        init_attr("init"),
        {"init_std", AttrKind::Float}}},
  };
}

// Layers of several inputs, and the inference heads.
std::vector<LayerSchema> combining_layers() {
  return {
      {"add", "elementwise sum of its inputs (residual connections)", {}, 2, 8},
      {"mul", "elementwise product of two inputs", {}, 2, 2},
      {"concat", "concatenation along an axis", {{"axis", AttrKind::Int}}, 2, 8},
      {"softmax", "softmax over the last dim (inference heads)", {}},
  };
}

std::vector<LayerSchema> build() {
  std::vector<LayerSchema> all;
  for (auto part : {dense_layers, pointwise_layers, sequence_layers, combining_layers})
    for (LayerSchema& schema : part()) all.push_back(std::move(schema));
  return all;
}

}  // namespace

const std::vector<LayerSchema>& layer_schemas() {
  static const std::vector<LayerSchema> schemas = build();
  return schemas;
}

const std::map<std::string_view, std::string_view>& ops_without_a_layer() {
  static const std::map<std::string_view, std::string_view> ops = {
      {"matmul",
       "no layer needs a batched product of two activations: attention layers use the attention op"},
      {"log_softmax", "the loss is softmax_cross_entropy, which includes it"},
      {"softmax_cross_entropy", "the loss ([train] loss)"},
      {"count_correct", "the trainer's accuracy"},
      {"batch_norm_train", "a batch_norm layer in training"},
      {"batch_norm_inference", "a batch_norm layer at evaluation"},
      {"sub", "features and gradients (no layer subtracts)"},
      {"scale", "loss scaling and gradient averaging"},
      {"reduce_sum", "gradients of broadcasting ops"},
      {"reduce_mean", "no v1 layer reduces; losses average inside their op"},
      {"reshape", "a flatten layer"},
      {"transpose", "no v1 layer permutes axes: attention reads either layout"},
      {"copy", "features that keep a copy of a tensor"},
      {"fill", "features' and the host's constant tensors"},
      {"cast", "mixed precision and dtype conversions"},
      {"quantize", "INT8 evaluation of a model `tandem quantize` calibrated"},
      {"dequantize", "INT8 evaluation of a model `tandem quantize` calibrated"},
      {"linear_int8", "a linear layer in INT8 evaluation"},
      {"conv2d_int8", "a conv2d layer in INT8 evaluation"},
      {"fake_quant", "the quantize feature's quantization-aware training"},
      {"rope", "an attention layer with rope = true"},
  };
  return ops;
}

const LayerSchema* find_layer_schema(const std::string& op) {
  for (const auto& s : layer_schemas())
    if (s.op == op) return &s;
  return nullptr;
}

const char* attr_kind_name(AttrKind kind) {
  switch (kind) {
    case AttrKind::Int:
      return "an integer";
    case AttrKind::Float:
      return "a number";
    case AttrKind::Bool:
      return "true or false";
    case AttrKind::String:
      return "a string";
    case AttrKind::Ints:
      return "a list of integers";
    case AttrKind::Floats:
      return "a list of numbers";
    case AttrKind::IntOrInts:
      return "an integer or a list of two integers";
  }
  return "?";
}

}  // namespace tandem::host::model
