// How a composed executor's forward and backward run as a pipeline of
// micro-batches (pipelined_executor.hpp): the stages and their segments
// (pipeline_schedule.hpp), which values each micro-batch in flight needs a
// copy of, and how every copy between devices runs.
//
// Values. A stage holds one "instance" of its part per micro-batch in
// flight: the part's executor again, with its own activations, sharing the
// first instance's parameters, gradient accumulators, optimizer state and
// every other persistent value — except those that carry one micro-batch:
//   - the inputs the host writes for each micro-batch (the batch, its
//     labels, dropout's seed offset) and their copies on other devices
//     ("feeds": written from host memory into each instance);
//   - both ends of a copy made for each micro-batch ("pulls": an
//     activation, or a gradient, that another stage reads).
// Copies. Each transfer of the composed schedule runs as one of:
//   pull        once per micro-batch, by the reading stage right before the
//               segment that reads it, from the writing stage's instance of
//               that micro-batch, once the segment that wrote it has run (or
//               by the writing stage right after it, when the reading stage
//               holds the micro-batch already); a source the writing stage
//               rewrites later in the micro-batch waits for the copy;
//   feed        the destination is written from the host's bytes instead;
//   before      once per step, before the micro-batches: a value nothing in
//               forward or backward writes (a weight read on another device);
//   after       once per step, after them: read only by the optimizer.
// Transfers of the optimizer phase stay with the composed executor.
//
// plan_pipeline() refuses (TDM_UNSUPPORTED, saying why) a graph that does
// not fit that scheme: a copy that must run in order, the optimizer
// reading a value of one micro-batch, an order that cannot finish. The caller then runs the
// micro-batches one after another.
#pragma once

#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "exec/composed_executor.hpp"
#include "exec/pipeline_schedule.hpp"
#include "util/result.hpp"

namespace tandem::host::exec {

struct PipelineRequest {
  size_t micro_batches = 1;
  size_t optimizer_begin = 0;  // global schedule: [0, optimizer_begin) is forward and backward
  // The values the host writes for each micro-batch (global ids).
  std::vector<ValueId> per_micro_batch;
  // A global value's name, for the reasons given (none: its id).
  std::function<std::string(ValueId)> value_name;
};

struct PipelineLayout {
  struct Pull {
    size_t transfer = 0;  // index into the composed executor's transfers()
    SegmentRef producer, consumer;
    // The producer's segment that rewrites the source later in the same
    // micro-batch (it waits for the copy), or kNoSegment.
    size_t rewritten = kNoSegment;
  };
  struct Feed {
    size_t part = 0;
    ValueId value = kNoValue;  // the part's value
    size_t input = 0;          // index into PipelineRequest::per_micro_batch
  };
  size_t micro_batches = 1;
  std::vector<size_t> stage_part;           // stage -> part of the composed executor
  std::vector<std::vector<size_t>> bounds;  // per stage: segment g is local nodes [bounds[g], bounds[g+1])
  PipelineShape shape;
  PipelineOrder order;
  std::vector<Pull> pulls;
  std::vector<Feed> feeds;
  std::vector<size_t> before_step, after_step;  // transfers
  // Per part: the storages (planner owners) each instance holds its own of.
  std::vector<std::set<ValueId>> per_instance;

  // The stage of a part; stage_part.size() when it takes no part.
  size_t stage_of(size_t part) const;
  size_t instances(size_t stage) const { return order.in_flight[stage]; }
  // Chunks of the model on each device: 1, or v for interleaved 1F1B.
  size_t chunks() const;
};

Result<PipelineLayout> plan_pipeline(const ComposedExecutor& composed, const PipelineRequest& request);

}  // namespace tandem::host::exec
