// Pipeline parallelism across ranks: which layers each stage holds, and the
// layout every rank runs its stage by (exec/rank_pipeline.hpp).
//
// Stages are runs of consecutive layers (the model file's order), cut so
// that the slowest stage is as fast as it can be, by each layer's measured
// op costs (cost_model.hpp). Nodes outside layers follow their inputs, as
// placement does; each stage is a "device" of a placement
// (stage_device()), so the split graph (split.hpp) gives each stage its
// graph and the copies between stages, which become messages.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "exec/rank_pipeline.hpp"
#include "graph/graph.hpp"
#include "model/model_spec.hpp"
#include "place/split.hpp"
#include "util/result.hpp"

namespace tandem::host::place {

// The placement's name for stage k of a pipeline on `device`: "onednn:0/stage1".
std::string stage_device(const std::string& device, size_t stage);

// `costs`: each layer's measured time (any unit; a layer absent costs 1).
// Each of the `stages` gets at least one layer; an error says so when the
// model has fewer layers than stages.
Result<std::vector<size_t>> cut_into_stages(const model::ModelSpec& spec,
                                            const std::map<std::string, double>& costs, size_t stages);

// The stages [train] pipeline_cut asks for: stage k+1 begins at the layer
// `firsts[k]` names (or the first layer of the repeat copy it names).
// Errors name the key and what to change.
Result<std::vector<size_t>> cut_at(const model::ModelSpec& spec, const std::vector<std::string>& firsts,
                                   size_t stages);

struct StagePipelineRequest {
  size_t micro_batches = 1;
  bool pipelined = true;                     // one forward, one backward; else each micro-batch in turn
  size_t optimizer_begin = 0;                // global schedule position
  std::vector<std::string> per_micro_batch;  // global names of the values the host writes for each
  std::vector<std::string> stage_devices;    // stage k's device in the split graph
};

// Segments, order, messages and homes for every stage. TDM_UNSUPPORTED,
// saying why, for a cut this scheme cannot run: state carried across
// micro-batches that another stage reads, a stage without forward or
// backward, an order that cannot finish.
Result<exec::RankPipelineLayout> plan_stage_pipeline(const SplitGraph& split,
                                                     const std::map<ValueId, std::string>& home,
                                                     const StagePipelineRequest& request);

}  // namespace tandem::host::place
