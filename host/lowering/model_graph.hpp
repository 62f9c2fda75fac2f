// The forward graph of a model, built from its ModelSpec for one batch size.
//
// Values of a built model:
//   "input"  [B, ...sample shape] f32   fed by the data pipeline
//   "labels" [B] s32                    fed by the data pipeline
//   "<layer>"                           each layer's output
//   "<layer>.weight", ".bias", ...      parameters (with initialisers)
//   "<layer>.running_mean", ...         state
//   "loss"   [] f32                     the training objective
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "lowering/int8_plan.hpp"
#include "model/model_spec.hpp"
#include "ops/shapes.hpp"
#include "tandem/op_shape_query.hpp"
#include "util/result.hpp"

namespace tandem::host::lowering {

using ops::Dims;
using ops::dims_str;
using ops::numel;
using shapes::broadcast;
using shapes::window_out;

// Decode: a language model's graph for `tandem generate`, one new token per
// run attending to the cached keys and values of the tokens before it (an
// evaluation graph otherwise: no dropout, no gradients).
enum class Mode { Train, Eval, Decode };

// How a parameter or state tensor starts (host-side, seeded).
struct Initializer {
  std::string method = "zeros";  // kaiming, kaiming_uniform, xavier, xavier_uniform, normal, zeros, ones
  int64_t fan_in = 1;
  int64_t fan_out = 1;
  double std = 0.01;  // for "normal"
};

// Tensor parallelism: this process's place among the ranks that split the
// layers marked `parallel`. With size 1 those layers are built whole.
struct TensorParallel {
  int rank = 0;
  int size = 1;
};

// A parameter of which this rank holds one of `TensorParallel::size` equal
// slices along `axis`; `full` is the whole tensor's shape (as a checkpoint
// stores it).
struct Shard {
  int axis = 0;
  std::vector<int64_t> full;
};

// ZeRO (lowering/optimizer.hpp): the data-parallel peers that share the
// optimizer's state and work, and the optimizer state each holds one shard
// of (s = ceil(n / world) of the parameter's n elements, rank r the
// elements [r*s, r*s + s), zero-padded past n).
struct ZeroSharding {
  int stage = 0;  // 0: none; 1: optimizer state; 2: gradients too; 3: parameters too
  int world = 1;
  std::map<ValueId, std::vector<int64_t>> states;     // shard -> the parameter's whole shape
  std::map<ValueId, std::vector<int64_t>> gradients;  // stage 2: gradient shard -> its whole shape
  // Stage 3: the parameters, each a shard, with their whole shape; a layer
  // reads the whole one gathered just before its forward (and again before
  // its backward: lowering/zero_gathers.hpp).
  std::map<ValueId, std::vector<int64_t>> parameters;
  bool active() const { return stage > 0 && world > 1; }
  bool shards_parameters() const { return stage >= 3 && world > 1; }
};

// Elements of one rank's shard of a tensor over `world` ranks.
using ops::zero_shard_elements;

struct ModelGraph {
  Graph graph;
  Mode mode = Mode::Train;
  tdm_dtype dtype = TDM_F32;  // of inputs, parameters and activations
  int64_t batch = 0;
  ValueId input = kNoValue;
  ValueId labels = kNoValue;
  ValueId logits = kNoValue;
  ValueId loss = kNoValue;
  // Training's running sums on the device, [Σ loss, Σ rows predicted right]
  // over the micro-batches since the trainer last read and cleared them
  // (kTrainStatsName; kNoValue where the backends predate count_correct).
  ValueId train_stats = kNoValue;
  // count_correct of the logits and labels (f32[]): an evaluation reads it
  // instead of the logits (kNoValue where the backends predate the op).
  ValueId correct = kNoValue;
  std::vector<ValueId> parameters;     // weights, in layer order
  std::set<ValueId> frozen;            // those of layers with trainable = false, the base under LoRA
  std::set<std::string> lora_matched;  // [features.lora] targets that matched a projection
  // The adapters LoRA adds: weights from elsewhere (--init-from a base) lack them.
  std::set<ValueId> lora_adapters;
  // The nodes that widen each narrow LoRA base weight to f32, in order
  // (lora_base.hpp): a cast, and for INT8 the mul by its row scales.
  std::vector<std::vector<NodeId>> narrow_bases;
  bool trained(ValueId parameter) const { return frozen.count(parameter) == 0; }
  std::map<ValueId, Initializer> initializers;  // parameters and state
  TensorParallel tensor_parallel;
  // Attention layers of a training graph read q, k, v as the projections
  // give them (layout "bthd", sdk/ops.md), without transposes: only when
  // every backend of the run speaks ABI 1.8 (kAttentionLayoutMinor).
  bool attention_tokens_first = false;
  // Autodiff adds a value's gradient so far into linear_grad_input,
  // layer_norm_grad and rms_norm_grad (their `addend`) instead of summing
  // the readers' gradients with `add`: only when every backend of the run
  // speaks ABI 1.9 (kGradientAddendMinor).
  bool gradient_addends = false;
  std::map<ValueId, Shard> shards;  // parameters split by tensor parallelism
  // Activations of which this rank holds a slice of the last dim (a
  // column-parallel linear without gather_output, and elementwise layers on it).
  std::set<ValueId> split_activations;
  std::vector<NodeId> dropout_nodes;
  // Mode::Decode: the new token's position p (s64 [] for rope, s32 [1] for
  // a position table), the mask of the attended slots (u8 [1, context]: the
  // context - 1 cache slots, right-aligned, then the new token; 1 = empty),
  // and per attention layer its cache inputs [1, G, context - 1, head_dim]
  // and the new token's key and value [1, G, 1, head_dim] to append to them.
  // Mode::Eval: per attention layer the keys and values [B, G, T, head_dim]
  // (k_new, v_new; no cache inputs), from which a decoder's cache is filled.
  struct KvCache {
    std::string layer;
    ValueId k_cache = kNoValue, v_cache = kNoValue, k_new = kNoValue, v_new = kNoValue;
  };
  ValueId decode_position = kNoValue, decode_position_index = kNoValue, decode_mask = kNoValue;
  std::vector<KvCache> caches;
  ValueId dropout_step = kNoValue;  // "dropout.step" [] s64: every dropout node's seed_offset,
                                    // written by the host each step so masks change per step

  // Filled by append_backward / append_optimizer (training graphs only).
  std::map<ValueId, ValueId> gradients;  // parameter -> its gradient
  size_t backward_begin = 0;             // schedule index of the first backward node
  size_t optimizer_begin = 0;            // schedule index of the first optimizer node
  ValueId lr = kNoValue;                 // "optim.lr" [] f32, written by the host each step
  ValueId step = kNoValue;               // "optim.step" [] s32 (1-based), for AdamW
  ValueId grad_norm_sq = kNoValue;       // "optim.grad_norm_sq" [], when clipping
  ValueId clip_coef = kNoValue;          // "optim.clip_coef" [], written by the host
  ZeroSharding zero;                     // [train] zero over the data-parallel ranks
};

// Builds the forward graph, inferring every shape. Errors name the layer,
// the layer that fed it, and both shapes.
// `dtype` is f32 for training; f64 lets tests check whole-graph gradients
// against finite differences on the reference backend.
// `tp`: with size > 1, layers marked `parallel` hold only this rank's slice
// and exchange activations with "comm.*" nodes (see exec/collectives.hpp).
// `int8`: layers listed there are emitted in INT8 (quantize + linear_int8 or
// conv2d_int8; eval mode only, see build/int8_layers.cpp).
// `backend_abi_minor`: the lowest negotiated ABI minor of the backends that
// will run the graph; catalog attributes newer than it are not emitted
// (ABI.md rule 33). 0 builds what every backend runs.
// `zero`: with stage 3 over several ranks, every parameter is this rank's
// shard, gathered whole before the layer that reads it.
Result<ModelGraph> build_forward(const model::ModelSpec& spec, int64_t batch, Mode mode,
                                 tdm_dtype dtype = TDM_F32, TensorParallel tp = {},
                                 const Int8Plan* int8 = nullptr, uint32_t backend_abi_minor = 0,
                                 ZeroSharding zero = {});
// The ABI minor that brought attention's `layout` attribute.
constexpr uint32_t kAttentionLayoutMinor = 8;
// ModelGraph::gradient_addends: the `addend` input of linear_grad_input,
// layer_norm_grad and rms_norm_grad (ABI 1.9).
constexpr uint32_t kGradientAddendMinor = 9;
// Products from bf16/f16 operands into f32 outputs (ops.md "Wide outputs"),
// which feature passes may insert when every backend speaks ABI 1.11.
constexpr uint32_t kWideProductsMinor = 11;
// ModelGraph::train_stats: count_correct, in the catalog of SDK 1.12 (ABI 1.11).
constexpr uint32_t kDeviceStatsMinor = 11;
// rope's scaling attributes (Llama 3.1's long context), ABI 1.14.
constexpr uint32_t kRopeScalingMinor = 14;
constexpr const char* kTrainStatsName = "tandem.train.stats";
// The activations a training step's host reads after its forward and
// backward, which the memory plan keeps live: the loss, and the logits
// where the accuracy is counted on the host (no train_stats).
std::vector<std::string> training_reads(const ModelGraph& m);
// Values of a run that no checkpoint holds (the training statistics).
inline bool run_local(const Value& v) {
  return v.name.rfind("tandem.train.", 0) == 0;
}
// Whether any layer asks for tensor parallelism.
bool uses_tensor_parallelism(const model::ModelSpec& spec);
// Whether a backend of ABI minor `abi_minor` can run the model's tensor
// parallelism: vocabulary-parallel embeddings need the catalog's
// vocab_start (SDK 1.3); an older backend would read every index of its
// slice as a row of its own, so it is refused rather than trained wrong.
// Likewise rope_scaling needs rope's scaling attributes (SDK 1.15).
// `abi_minor`: the lowest of the run's backends; `tensor_parallel`: the
// run splits layers over ranks.
Result<void> check_backend_for(const model::ModelSpec& spec, const std::string& backend, uint32_t abi_minor,
                               bool tensor_parallel);

}  // namespace tandem::host::lowering
