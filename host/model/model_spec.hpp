// What a model file says, checked and typed, before any graph exists.
//
// A model file (TOML) has:
//   [model]            name, input shape of one sample, classes
//   [[layers]]         the layers in order: name, op, attributes, optional
//                      inputs (a DAG; the previous layer by default), device,
//                      initialisers
//   [loss]             the training objective
//   [train]            optimizer, schedule, batch size, epochs/steps, clipping, seed
//   [data]             where the samples come from and how they are prepared
//   [features.NAME]    configuration handed verbatim to feature plugin NAME
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "model/checkpoint_every.hpp"

namespace tandem::host::model {

// Where something was written, for error messages ("model.toml:12:3").
struct SourceLocation {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
  std::string str() const;
};

using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>>;

struct LayerSpec {
  std::string name;
  std::string op;                     // layer kind: linear, conv2d, relu, flatten, add, ...
  std::vector<std::string> inputs;    // empty = the previous layer (or the model input)
  std::optional<std::string> device;  // pinned device, e.g. "onednn:0" or "cpu"
  // `stream = true`: its parameters, gradients and optimizer state live in
  // host memory and are streamed through the device around its nodes
  // (`false` keeps them resident even under --stream-params).
  std::optional<bool> stream;
  // `trainable = false`: its parameters stay as loaded (no gradient, no
  // optimizer state); the gradient still flows through it to earlier layers.
  bool trainable = true;
  std::map<std::string, AttrValue> attrs;
  SourceLocation where;

  int64_t int_attr(const std::string& key, int64_t fallback) const;
  double float_attr(const std::string& key, double fallback) const;
  bool bool_attr(const std::string& key, bool fallback) const;
  std::string string_attr(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> ints_attr(const std::string& key, std::vector<int64_t> fallback) const;
};

struct LossSpec {
  std::string op = "softmax_cross_entropy";
  double label_smoothing = 0.0;
};

struct TrainSpec {
  std::string optimizer = "sgd";  // sgd | adamw
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  std::string schedule = "constant";  // constant | step | cosine
  int64_t warmup_steps = 0;           // linear warm-up from 0 to lr
  int64_t step_size = 0;              // step schedule: every step_size steps ...
  double gamma = 0.1;                 // ... multiply by gamma
  double min_lr = 0.0;                // cosine floor
  int64_t batch_size = 32;
  int64_t epochs = 1;           // used when steps == 0
  int64_t steps = 0;            // total optimizer steps; overrides epochs when > 0
  double clip_grad_norm = 0.0;  // 0 = off
  // Ranks of a launched run that split the layers marked `parallel`: each
  // group of this many consecutive ranks holds one model, and the groups
  // split the data. 0: every rank of the run. One process ignores it.
  int64_t tensor_parallel = 0;
  // ZeRO over the data-parallel ranks (lowering/optimizer.hpp): 0 none, 1
  // optimizer state sharded, 2 gradients too, 3 parameters too. One
  // process ignores it.
  int64_t zero = 0;
  // Stages 2 and 3 exchange while backward and forward compute
  // (lowering/zero_overlap.hpp); false exchanges in place, holding the
  // schedule up (less memory: no gradient in flight, one layer gathered).
  bool zero_overlap = true;
  // The comm plugin that joins the ranks of a launched run, by name; ""
  // chooses by the device's memory: nccl for GPU memory, mpi for host
  // memory. `tandem train --comm NAME` overrides it.
  std::string comm;
  uint64_t seed = 0;
  int64_t log_every = 50;  // steps between plain progress lines
  int64_t keep_checkpoints = 3;
  // Checkpoints besides epoch ends and stops (model/checkpoint_every.hpp).
  CheckpointEvery checkpoint_every;
  // Where the optimizer updates run and its state and the parameters' master
  // copy live ("cpu": ZeRO-Offload style); "" = next to the parameters.
  std::string optimizer_device;
  // Micro-batches each batch is split into (0: as [features.grad_accum]
  // says, else one). With layers on several devices of one process they
  // run as a pipeline (one forward, one backward) unless `pipeline` is
  // false; gradients are accumulated over them as grad_accum does (the host
  // adds [features.grad_accum] micro_batch = batch_size / this when the
  // file has no such section).
  int64_t pipeline_microbatches = 0;
  bool pipeline = true;
  // Ranks the layers are split over, each holding a run of consecutive
  // layers balanced by measured cost (0 or 1: none); the micro-batches run
  // over them one forward, one backward. With data and tensor parallelism,
  // the run's ranks form a grid of data x tensor x pipeline.
  int64_t pipeline_parallel = 0;
  // Where the stages begin, when the user decides instead of the measured
  // costs: the first layer of each stage after the first, in order (a
  // repeat's copy by its name, "h.6": its first layer).
  std::vector<std::string> pipeline_cut;
  // "auto": unpinned layers go where the budgets and the measured costs say;
  // "pinned": layers run where their `device` says, else on the run's
  // device; "strict": pinned, and any copy between devices that is not
  // between two pinned layers is an error. "" = auto when the run names
  // several devices, else pinned.
  std::string placement;
};

struct DataSpec {
  bool given = false;                                                // the file has a [data] section
  std::string format = "idx";                                        // idx | csv | synthetic | tokens
  std::string train_images, train_labels, test_images, test_labels;  // idx
  std::string train_csv, test_csv;                                   // csv
  int64_t label_column = 0;
  bool csv_header = false;
  int64_t synthetic_samples = 1024;  // synthetic
  int64_t synthetic_test_samples = 256;
  double synthetic_noise = 0.5;
  int64_t synthetic_vocab = 0;  // > 0: token ids for embedding models
  // tokens (a language model's): a file of token ids (raw bytes of text for
  // u8, or nanoGPT's train.bin/val.bin for u16), the validation file, and
  // how many random windows one training epoch draws (0: tokens / context).
  std::string train_tokens, val_tokens, token_dtype = "u8";
  int64_t windows_per_epoch = 0;
  double validation_split = 0.0;
  std::vector<double> normalize_mean, normalize_std;
  int64_t random_crop_padding = 0;
  double horizontal_flip = 0.0;
  int64_t threads = 2;
  int64_t prefetch = 4;
};

// [features.lora]: low-rank adapters (LoRA) on the listed linear layers and
// attention projections, y = x·Wᵀ + b + (alpha/rank)·B·A·dropout(x), A
// [rank, in] and B [out, rank]; every other parameter is frozen. The host
// builds it (no plugin): it adds parameters, which a graph pass cannot.
struct LoraSpec {
  bool enabled = false;
  int64_t rank = 8;
  double alpha = 16.0;
  double dropout = 0.0;
  // Glob patterns ('*' any text) over layer names and, for an attention
  // layer "<l>", its projections "<l>.q", "<l>.k", "<l>.v", "<l>.out".
  std::vector<std::string> targets;
  // "f32"; "bf16" or "int8": every frozen linear weight stored so, "int8"
  // as s8 with f32 row scales quantized from the weights the run starts
  // from (QLoRA's idea at 8 bits; lowering/lora_base.hpp).
  std::string base = "f32";
};

struct ModelSpec {
  std::string path;  // the model file
  std::string name;
  // The Hugging Face directory it was imported from (`tandem import` writes
  // it): `export --format hf` takes the configuration and tokenizer there.
  std::string hf_dir;
  // "classify": one label per sample; "language_model": the input is
  // `context` token ids per sample, the labels the next token at every
  // position, the loss the mean over tokens (input_shape = [context],
  // classes = vocab_size).
  std::string task = "classify";
  std::vector<int64_t> input_shape;  // one sample, e.g. [1, 28, 28]
  int64_t classes = 0;
  bool language_model() const { return task == "language_model"; }
  // A language model over bytes (u8 token ids, all 256 of them): its loss
  // per token, in bits, is its bits per byte.
  bool byte_level() const { return language_model() && data.token_dtype == "u8" && classes == 256; }
  std::vector<LayerSpec> layers;
  LossSpec loss;
  TrainSpec train;
  DataSpec data;
  std::map<std::string, std::map<std::string, std::string>> features;  // [features.NAME] flattened
  LoraSpec lora;  // [features.lora], which the host builds (not in `features`)
  bool has_feature(const std::string& name) const {
    return features.count(name) > 0 || (name == "lora" && lora.enabled);
  }
  // Where each feature's settings came from, for its messages: the model
  // file ("model.toml:14:1", the section), and each override that set a key
  // or made the section ("--set features.amp.dtype=f16"; the CLI renames
  // those a --feature flag made to "--feature amp:dtype=f16").
  std::map<std::string, std::vector<std::string>> feature_origins;
  std::string source_hash;  // FNV-1a 64 of the model after overrides (run length excluded), for checkpoints
};

}  // namespace tandem::host::model
