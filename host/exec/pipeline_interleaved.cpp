// Interleaved one-forward-one-backward (Megatron-LM's schedule for a model
// split into more chunks than devices): each device holds v chunks of
// consecutive layers, chunk k of device p being the model's stage k·P + p,
// and alternates between them in groups of P micro-batches, so the pipeline
// fills and drains v times faster: the bubble of equal stages falls from
// (P - 1) / (M + P - 1) to about (P - 1) / (v·M + P - 1).
#include <algorithm>
#include <cstdint>

#include "exec/pipeline_schedule.hpp"

namespace tandem::host::exec {
namespace {

// A stage's chunks of one direction, [first, end) ranges of its segments:
// a chunk starts where a segment waits for another stage's segment of the
// same direction that lies further along that stage than what earlier
// chunks waited for (the model's previous stage, on another device). A wait
// for something further back (a tied weight's gradient, made long before)
// starts none.
std::vector<std::pair<size_t, size_t>> chunks(const PipelineShape& shape, size_t stage, bool backward) {
  const auto& segments = shape.stages[stage];
  size_t first = 0;
  while (first < segments.size() && segments[first].backward != backward) ++first;
  size_t end = first;
  while (end < segments.size() && segments[end].backward == backward) ++end;
  std::vector<std::pair<size_t, size_t>> out;
  std::vector<int64_t> reached(shape.stages.size(), -1);  // per other stage: its furthest segment waited for
  for (size_t g = first; g < end; ++g) {
    bool starts = g == first;
    for (const SegmentRef& a : segments[g].after) {
      if (a.stage == stage || shape.stages[a.stage][a.segment].backward != backward) continue;
      if (int64_t(a.segment) > reached[a.stage]) {
        reached[a.stage] = int64_t(a.segment);
        starts = true;
      }
    }
    if (starts) out.push_back({g, end});
  }
  for (size_t i = 0; i + 1 < out.size(); ++i) out[i].second = out[i + 1].first;
  return out;
}

}  // namespace

std::optional<PipelineOrder> interleaved_one_forward_one_backward(const PipelineShape& shape,
                                                                  size_t micro_batches) {
  const size_t stages = shape.stages.size();
  if (stages < 2 || micro_batches % stages != 0) return std::nullopt;
  std::vector<std::vector<std::pair<size_t, size_t>>> forward(stages), backward(stages);
  for (size_t s = 0; s < stages; ++s) {
    forward[s] = chunks(shape, s, false);
    backward[s] = chunks(shape, s, true);
  }
  const size_t v = forward[0].size();
  if (v < 2) return std::nullopt;
  for (size_t s = 0; s < stages; ++s) {
    if (forward[s].size() != v || backward[s].size() != v) return std::nullopt;
    // Every segment in some unit: a stage's forward segments, then its backward ones.
    const size_t segments = shape.stages[s].size();
    if (forward[s].front().first != 0 || forward[s].back().second != backward[s].front().first ||
        backward[s].back().second != segments)
      return std::nullopt;
  }
  // The i-th chunk-unit of a direction on a device: micro-batches in groups
  // of P, each group through every chunk before the next group.
  const auto micro_of = [&](size_t i) { return i / (stages * v) * stages + i % stages; };
  const auto chunk_of = [&](size_t i) { return (i / stages) % v; };
  PipelineOrder order;
  const size_t units = micro_batches * v;
  for (size_t p = 0; p < stages; ++p) {
    std::vector<PipelineUnit> list;
    const auto f = [&](size_t i) {
      const auto [first, end] = forward[p][chunk_of(i)];
      list.push_back({micro_of(i), first, end});
    };
    // Backward chunks run last chunk first: the i-th is backward[p][chunk_of(i)].
    const auto b = [&](size_t i) {
      const auto [first, end] = backward[p][chunk_of(i)];
      list.push_back({micro_of(i), first, end});
    };
    const size_t warm_up = std::min((stages - p - 1) * 2 + (v - 1) * stages, units);
    for (size_t i = 0; i < warm_up; ++i) f(i);
    for (size_t i = 0; i < units; ++i) {
      if (warm_up + i < units) f(warm_up + i);
      b(i);
    }
    order.in_flight.push_back(in_flight_of(list, shape.stages[p].size()));
    order.stages.push_back(std::move(list));
  }
  return order;
}

}  // namespace tandem::host::exec
