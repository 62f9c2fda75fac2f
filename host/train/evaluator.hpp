// Evaluation: the model's eval-mode program (program/program.hpp: dropout
// off, batch norm on its running statistics, placed as the model file pins
// it) run over a data set, reporting mean loss and accuracy.
//
// One program per batch size (the last batch of a set is usually short);
// all of them read the same parameters: either the training executor's
// buffers (`shared`), or those of the first eval executor, which then owns
// them (standalone `tandem eval`).
//
// During training, a device without room for an evaluation executor beside
// the training one (its activations) is not fatal: the set is evaluated
// again in batches half as large, until it fits, and a warning says so
// (the loss and accuracy are the same, per sample).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "data/dataset.hpp"
#include "data/transforms.hpp"
#include "exec/executor.hpp"
#include "lowering/model_graph.hpp"
#include "place/placement.hpp"
#include "program/program.hpp"

namespace tandem::host::train {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
  int64_t samples = 0;
  // Wall time of the graph runs alone (inputs written, graph run, outputs
  // read), without data loading: what a throughput of the model measures.
  double compute_seconds = 0;
  std::vector<double> batch_seconds;  // the same, per batch, in loader order
};

class Evaluator {
 public:
  Evaluator(const model::ModelSpec& spec, const DeviceHandle& device, const PluginRegistry& registry,
            std::map<std::string, void*> shared = {})
      : spec_(spec), device_(device), registry_(registry), shared_(std::move(shared)) {}

  // Tensor parallelism: every rank of `group` evaluates the same samples
  // with its slices of the layers, exchanging activations through `collectives`.
  void use_tensor_parallelism(program::ProcessGroup group, exec::Collectives* collectives) {
    group_ = std::move(group);
    collectives_ = collectives;
  }

  // Pipeline parallelism across ranks: each rank evaluates its stage of
  // every batch, passing activations along as training does.
  void use_pipeline(program::ProcessGroup group, exec::StageLink* link) {
    group_ = std::move(group);
    stage_link_ = link;
  }

  // ZeRO stage 3: the evaluation gathers each layer's parameters from the
  // shards every rank holds, as training does; every rank evaluates.
  void use_zero(program::ProcessGroup group, exec::Collectives* collectives) {
    group_ = std::move(group);
    zero_collectives_ = collectives;
  }

  // Shared values of a training run that streams them (exec/stream_plan.hpp):
  // their `shared` pointers are homes in host memory, and the evaluation
  // streams them through the device too.
  void use_streamed(std::set<std::string> names) { streamed_ = std::move(names); }

  // An INT8 model (`tandem quantize`): these layers run as quantize +
  // linear_int8 / conv2d_int8. Call before load().
  void use_int8(lowering::Int8Plan plan) { int8_ = std::move(plan); }

  // Layers pinned to several devices: evaluation graphs are placed like
  // training's, on `devices` (every device a pin of the model resolves to).
  void use_placement(place::PlacementOptions options, std::map<std::string, const DeviceHandle*> devices) {
    placement_ = std::move(options);
    devices_ = std::move(devices);
  }

  // What the graph received and produced for every evaluated sample
  // (`tandem eval --outputs`): the inputs after the data pipeline, in the
  // graph's input dtype, and the logits, each with the per-sample dims.
  struct Outputs {
    tdm_dtype input_dtype = TDM_F32;
    std::vector<int64_t> input_dims, logits_dims;  // one sample's
    std::vector<std::byte> inputs;
    std::vector<float> logits;
    int64_t samples = 0;
  };
  // Later evaluate() calls append to `outputs` (nullptr: stop).
  void keep_outputs(Outputs* outputs) { outputs_ = outputs; }

  Result<EvalResult> evaluate(const data::Dataset& set, const data::Transforms& transforms, int threads);
  // Standalone use: loads parameters and running statistics.
  Result<void> load(const checkpoint::Checkpoint& cp, const std::string& source);

 private:
  Result<program::Program*> for_batch(int64_t batch);
  Result<EvalResult> evaluate_in_batches(const data::Dataset& set, const data::Transforms& transforms,
                                         int threads, int64_t batch);

  const model::ModelSpec& spec_;
  const DeviceHandle& device_;
  const PluginRegistry& registry_;
  std::map<std::string, void*> shared_;
  std::set<std::string> streamed_;    // of shared_: homes in host memory
  bool borrowed_ = !shared_.empty();  // the parameters belong to the trainer's executor
  int64_t batch_ = 0;                 // the batch that fits (0: [train] batch_size)
  std::map<int64_t, std::unique_ptr<program::Program>> compiled_;
  program::ProcessGroup group_;
  std::optional<place::PlacementOptions> placement_;
  std::map<std::string, const DeviceHandle*> devices_;
  exec::Collectives* collectives_ = nullptr;
  exec::Collectives* zero_collectives_ = nullptr;
  exec::StageLink* stage_link_ = nullptr;
  lowering::Int8Plan int8_;
  Outputs* outputs_ = nullptr;
};

// Index of the largest logit per row; ties go to the first.
int64_t count_correct(const std::vector<float>& logits, const std::vector<int32_t>& labels, int64_t rows,
                      int64_t classes);

}  // namespace tandem::host::train
