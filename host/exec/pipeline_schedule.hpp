// The order in which the stages of a pipeline work on the micro-batches of
// one optimizer step, and what that order costs.
//
// A model placed on several devices is cut into stages (one per device,
// ordered by where each one's forward starts) and each stage's share of one
// micro-batch into segments: runs of its nodes between the points where it
// waits for a copy from another stage or hands one to another. A segment is
// forward or backward (its first node's phase).
//
// One forward, one backward (1F1B, as Megatron-LM and DeepSpeed run it):
// stage s of S first runs the forwards of min(S - s - 1, M) micro-batches
// (warm-up), then alternates the forward of the next one with the backward
// of the oldest, then finishes the backwards. Backwards run in micro-batch
// order on every stage, so a gradient accumulated over the micro-batches is
// summed in the same order as by one device running them one after another.
// A stage holds at most S - s micro-batches at once: their activations, one
// copy per micro-batch in flight ("instances"). Interleaved 1F1B
// (pipeline_interleaved.cpp), for a model whose stages each hold several
// chunks of it, keeps the backwards of each chunk in micro-batch order too.
//
// simulate() runs an order against per-segment costs without running
// anything: it says whether the order can finish (a model whose stages
// depend on each other in ways 1F1B cannot serve would wait forever; the
// caller then runs the micro-batches one after another), how long it takes
// and how long each stage is idle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem::host::exec {

// A segment's place: stage, and its index among that stage's segments.
struct SegmentRef {
  size_t stage = 0;
  size_t segment = 0;
  bool operator==(const SegmentRef& o) const { return stage == o.stage && segment == o.segment; }
};

inline constexpr size_t kNoSegment = SIZE_MAX;

// What a segment that rewrites a value another stage reads waits for: the
// reading segment's copy of it, made after segment `read` of this stage.
struct CopyRef {
  SegmentRef reader;
  size_t read = 0;
};

struct PipelineSegment {
  bool backward = false;
  double cost = 1.0;  // any unit: only ratios matter
  // Segments of other stages, of the same micro-batch, that must have run
  // before this one (they produce what it reads).
  std::vector<SegmentRef> after;
  // Copies of values this segment rewrites that must be made before it runs.
  std::vector<CopyRef> copied_first;
};

// One micro-batch's work, stage by stage; every step repeats it M times.
struct PipelineShape {
  std::vector<std::vector<PipelineSegment>> stages;
};

// What a stage runs next: segments [first, end) of micro-batch `micro`.
struct PipelineUnit {
  size_t micro = 0;
  size_t first = 0, end = 0;
};

struct PipelineOrder {
  std::vector<std::vector<PipelineUnit>> stages;  // per stage, in order
  std::vector<size_t> in_flight;                  // per stage: micro-batches held at once (instances)
};

// 1F1B over `micro_batches` micro-batches (see the top of this file).
PipelineOrder one_forward_one_backward(const PipelineShape& shape, size_t micro_batches);
// Interleaved 1F1B (pipeline_interleaved.cpp), where every stage holds the
// same number v >= 2 of chunks, a chunk being a run of its segments that
// starts where it waits for another stage of the same direction, and M is a
// multiple of the stages; nullopt otherwise.
std::optional<PipelineOrder> interleaved_one_forward_one_backward(const PipelineShape& shape,
                                                                  size_t micro_batches);
// Chunks of the model on each stage in `order`: its first stage's forward
// units per micro-batch (1, or v for interleaved 1F1B).
size_t model_chunks(const PipelineShape& shape, const PipelineOrder& order, size_t micro_batches);
// The micro-batches a stage's units hold at once (begun, not finished).
size_t in_flight_of(const std::vector<PipelineUnit>& units, size_t segments);
// Every micro-batch's whole share in turn on each stage: what runs when
// the micro-batches are not pipelined (one in flight per stage).
PipelineOrder one_after_another(const PipelineShape& shape, size_t micro_batches);

struct PipelineTiming {
  double makespan = 0;
  std::vector<double> busy;  // per stage
  // The share of stage-time spent idle: 1 - sum(busy) / (stages * makespan).
  double idle_fraction() const;
};

// Runs `order` on the costs of `shape` (each stage one worker; a segment
// starts when its stage is free, what it waits for has run, and — at the
// start of a micro-batch on a stage — what the micro-batch its instance
// held made for other stages has been copied: right after it was made when
// the reader's stage held that micro-batch already, else when the reading
// segment starts). nullopt when the order cannot finish (the reason in
// `why`).
std::optional<PipelineTiming> simulate(const PipelineShape& shape, const PipelineOrder& order,
                                       std::string* why = nullptr);

// The bubble of 1F1B with equal stages: (S - 1) / (M + S - 1).
double bubble_fraction(size_t stages, size_t micro_batches);

}  // namespace tandem::host::exec
