#include "exec/pipeline_schedule.hpp"

#include <algorithm>

namespace tandem::host::exec {
namespace {

// Where a stage's backward begins (its first backward segment; the count
// of segments when it has none).
size_t backward_start(const std::vector<PipelineSegment>& segments) {
  size_t b = 0;
  while (b < segments.size() && !segments[b].backward) ++b;
  return b;
}

}  // namespace

// Begun: its first unit of a micro-batch ran; finished: its last unit of it.
size_t in_flight_of(const std::vector<PipelineUnit>& units, size_t segments) {
  size_t held = 0, most = 0;
  for (const PipelineUnit& u : units) {
    if (u.first == 0) most = std::max(most, ++held);
    if (u.end == segments && held > 0) --held;
  }
  return std::max<size_t>(most, 1);
}

size_t model_chunks(const PipelineShape& shape, const PipelineOrder& order, size_t micro_batches) {
  if (order.stages.empty() || shape.stages.empty() || micro_batches == 0) return 1;
  size_t forwards = 0;
  for (const PipelineUnit& u : order.stages.front())
    if (!shape.stages.front()[u.first].backward) ++forwards;
  return std::max<size_t>(1, forwards / micro_batches);
}

PipelineOrder one_forward_one_backward(const PipelineShape& shape, size_t micro_batches) {
  PipelineOrder order;
  const size_t stages = shape.stages.size();
  for (size_t s = 0; s < stages; ++s) {
    const size_t segments = shape.stages[s].size();
    const size_t b = backward_start(shape.stages[s]);
    std::vector<PipelineUnit> units;
    const auto forward = [&](size_t m) {
      if (b > 0) units.push_back({m, 0, b});
    };
    const auto backward = [&](size_t m) {
      if (b < segments) units.push_back({m, b, segments});
    };
    const size_t warm_up = std::min(stages - s - 1, micro_batches);
    for (size_t m = 0; m < warm_up; ++m) forward(m);
    for (size_t m = 0; m < micro_batches; ++m) {
      if (m + warm_up < micro_batches) forward(m + warm_up);
      backward(m);
    }
    order.in_flight.push_back(in_flight_of(units, segments));
    order.stages.push_back(std::move(units));
  }
  return order;
}

PipelineOrder one_after_another(const PipelineShape& shape, size_t micro_batches) {
  PipelineOrder order;
  for (const auto& segments : shape.stages) {
    std::vector<PipelineUnit> units;
    for (size_t m = 0; m < micro_batches; ++m)
      if (!segments.empty()) units.push_back({m, 0, segments.size()});
    order.stages.push_back(std::move(units));
    order.in_flight.push_back(1);
  }
  return order;
}

double PipelineTiming::idle_fraction() const {
  if (busy.empty() || makespan <= 0) return 0.0;
  double total = 0;
  for (double b : busy) total += b;
  return 1.0 - total / (static_cast<double>(busy.size()) * makespan);
}

double bubble_fraction(size_t stages, size_t micro_batches) {
  if (stages < 2 || micro_batches == 0) return 0.0;
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

namespace {

// Every segment's start and end time as an order runs them, computed as the
// dependencies allow (a longest path: the order of computing is free).
class Simulation {
 public:
  Simulation(const PipelineShape& shape, const PipelineOrder& order) : shape_(shape), order_(order) {
    const size_t stages = shape.stages.size();
    size_t micro_batches = 0;
    for (const auto& units : order.stages)
      for (const PipelineUnit& u : units) micro_batches = std::max(micro_batches, u.micro + 1);
    start_.resize(stages);
    for (size_t s = 0; s < stages; ++s)
      start_[s].assign(micro_batches, std::vector<double>(shape.stages[s].size(), kUnknown));
    end_ = start_;
    readers_.resize(stages);
    for (size_t s = 0; s < stages; ++s)
      for (size_t g = 0; g < shape.stages[s].size(); ++g)
        for (const SegmentRef& a : shape.stages[s][g].after) readers_[a.stage].push_back({{s, g}, a.segment});
  }

  std::optional<PipelineTiming> run(std::string* why) {
    const size_t stages = shape_.stages.size();
    PipelineTiming timing;
    timing.busy.assign(stages, 0.0);
    std::vector<size_t> unit(stages, 0), segment(stages, 0);
    std::vector<double> free(stages, 0.0);
    for (size_t s = 0; s < stages; ++s)
      if (!order_.stages[s].empty()) segment[s] = order_.stages[s][0].first;
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t s = 0; s < stages; ++s)
        while (unit[s] < order_.stages[s].size()) {
          const PipelineUnit& u = order_.stages[s][unit[s]];
          const auto at = ready_at(s, u.micro, segment[s], free[s]);
          if (!at) break;
          const double cost = shape_.stages[s][segment[s]].cost;
          start_[s][u.micro][segment[s]] = *at;
          end_[s][u.micro][segment[s]] = free[s] = *at + cost;
          timing.busy[s] += cost;
          timing.makespan = std::max(timing.makespan, free[s]);
          progress = true;
          if (++segment[s] == u.end && ++unit[s] < order_.stages[s].size())
            segment[s] = order_.stages[s][unit[s]].first;
        }
    }
    for (size_t s = 0; s < stages; ++s)
      if (unit[s] < order_.stages[s].size()) {
        if (why != nullptr)
          *why = "stage " + std::to_string(s) + " waits forever at micro-batch " +
                 std::to_string(order_.stages[s][unit[s]].micro) + ", segment " + std::to_string(segment[s]);
        return std::nullopt;
      }
    return timing;
  }

 private:
  static constexpr double kUnknown = -1.0;

  // When a reading segment's copy of micro-batch `m` is made: right after
  // the segment it reads when the reader's stage already holds `m` then,
  // else when the reading segment starts (pipelined_executor.cpp).
  double copied_at(const SegmentRef& r, size_t m, size_t stage, size_t read) const {
    const double made = end_[stage][m][read], begun = start_[r.stage][m][0];
    if (made == kUnknown || begun == kUnknown) return kUnknown;
    return begun <= made ? made : start_[r.stage][m][r.segment];
  }

  // A segment's earliest start once everything it waits for is known;
  // nullopt while something is not.
  std::optional<double> ready_at(size_t s, size_t m, size_t g, double free) const {
    double at = free;
    for (const SegmentRef& a : shape_.stages[s][g].after) {
      const double e = end_[a.stage][m][a.segment];
      if (e == kUnknown) return std::nullopt;
      at = std::max(at, e);
    }
    // Rewriting what another stage reads: its copy is made.
    for (const CopyRef& c : shape_.stages[s][g].copied_first) {
      const double copied = copied_at(c.reader, m, s, c.read);
      if (copied == kUnknown) return std::nullopt;
      at = std::max(at, copied);
    }
    // Reusing an instance: what the micro-batch it held made for others is copied.
    if (g == 0 && m >= order_.in_flight[s])
      for (const auto& [r, read] : readers_[s]) {
        const double copied = copied_at(r, m - order_.in_flight[s], s, read);
        if (copied == kUnknown) return std::nullopt;
        at = std::max(at, copied);
      }
    return at;
  }

  const PipelineShape& shape_;
  const PipelineOrder& order_;
  std::vector<std::vector<std::vector<double>>> start_, end_;  // [stage][micro][segment]
  // Per stage, who reads its segments: (the reading segment, the segment read).
  std::vector<std::vector<std::pair<SegmentRef, size_t>>> readers_;
};

}  // namespace

std::optional<PipelineTiming> simulate(const PipelineShape& shape, const PipelineOrder& order,
                                       std::string* why) {
  return Simulation(shape, order).run(why);
}

}  // namespace tandem::host::exec
