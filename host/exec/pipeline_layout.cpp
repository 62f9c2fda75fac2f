#include "exec/pipeline_layout.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include "exec/device_executor.hpp"

namespace tandem::host::exec {
namespace {

Error cannot(const std::string& why) {
  return make_error(why, TDM_UNSUPPORTED);
}

size_t local_index(const std::vector<size_t>& positions, size_t global) {
  return static_cast<size_t>(std::lower_bound(positions.begin(), positions.end(), global) -
                             positions.begin());
}

// A part's node (local index), before its segments are known.
struct PartNode {
  size_t part = 0, local = 0;
};

class Analysis {
 public:
  Analysis(const ComposedExecutor& composed, const PipelineRequest& request)
      : parts_(composed.parts()), transfers_(composed.transfers()), composed_(composed), request_(request) {
    layout_.micro_batches = request.micro_batches;
    layout_.per_instance.resize(parts_.size());
    cuts_.resize(parts_.size());
    for (const ExecutorPart& p : parts_) {
      forward_backward_.push_back(local_index(p.positions, request.optimizer_begin));
      std::map<ValueId, ValueId> global;
      for (const auto& [g, local] : p.local_of) global[local] = g;
      global_of_.push_back(std::move(global));
    }
  }

  Result<PipelineLayout> run() {
    add_feeds();
    for (size_t t = 0; t < transfers_.size(); ++t)
      if (auto r = classify(t); !r) return r.error();
    if (auto r = check_optimizer_reads(); !r) return r.error();
    make_stages();
    if (layout_.stage_part.size() < 2)
      return cannot("forward and backward run on one device (the others only update): nothing to pipeline");
    connect_pulls();
    // Interleaved where every device holds several chunks of the model,
    // else plain 1F1B; either only when it can finish.
    std::string why;
    if (auto interleaved = interleaved_one_forward_one_backward(layout_.shape, request_.micro_batches))
      if (simulate(layout_.shape, *interleaved)) {
        layout_.order = std::move(*interleaved);
        return std::move(layout_);
      }
    layout_.order = one_forward_one_backward(layout_.shape, request_.micro_batches);
    if (!simulate(layout_.shape, layout_.order, &why))
      return cannot("the stages depend on each other in a way one-forward-one-backward cannot serve (" + why +
                    ")");
    return std::move(layout_);
  }

 private:
  ValueId storage(size_t part, ValueId local) const {
    const ValueStorage* s = parts_[part].executor->plan().find(local);
    return s != nullptr ? s->owner : kNoValue;
  }
  bool persistent(size_t part, ValueId local) const {
    const ValueStorage* s = parts_[part].executor->plan().find(local);
    return s != nullptr && s->kind == ValueStorage::Kind::Persistent;
  }
  std::string name(size_t part, ValueId local) const {
    auto g = global_of_[part].find(local);
    if (g != global_of_[part].end() && request_.value_name)
      return "'" + request_.value_name(g->second) + "' on " + parts_[part].device;
    return "value " + std::to_string(g != global_of_[part].end() ? g->second : local) + " on " +
           parts_[part].device;
  }
  std::optional<size_t> input_index(ValueId global) const {
    const auto& v = request_.per_micro_batch;
    auto it = std::find(v.begin(), v.end(), global);
    if (it == v.end()) return std::nullopt;
    return static_cast<size_t>(it - v.begin());
  }

  void add_feeds() {
    for (size_t k = 0; k < request_.per_micro_batch.size(); ++k) {
      auto home = composed_.home_of(request_.per_micro_batch[k]);
      if (!home) continue;
      feed(home->first, home->second, k);
    }
  }
  void feed(size_t part, ValueId local, size_t input) {
    layout_.feeds.push_back({part, local, input});
    layout_.per_instance[part].insert(storage(part, local));
  }

  Result<void> classify(size_t t) {
    const ExecutorTransfer& x = transfers_[t];
    const TransferPoints& at = x.points;
    const size_t end = request_.optimizer_begin;
    if (at.destination_at == kNoPosition) return {};  // never read
    if (x.position >= end) {  // the optimizer's: it may not copy what each micro-batch makes
      if (made_per_micro_batch(x.from_part, x.from))
        return cannot("the optimizer reads " + name(x.from_part, x.from) +
                      ", which each micro-batch computes");
      return {};
    }
    if (at.in_order) return cannot("the copy of " + name(x.from_part, x.from) + " must run in order");
    if (at.destination_at >= end) {
      layout_.after_step.push_back(t);
      return {};
    }
    const auto global = global_of_[x.from_part].find(x.from);
    if (global != global_of_[x.from_part].end())
      if (auto k = input_index(global->second)) {
        feed(x.to_part, x.to, *k);
        return {};
      }
    const bool rewritten = at.source_rewritten_at != kNoPosition && at.source_rewritten_at < end;
    if (at.issue_after == kNoPosition) {
      if (rewritten)
        return cannot(name(x.from_part, x.from) +
                      " is copied once per step but rewritten within one micro-batch");
      layout_.before_step.push_back(t);
      return {};
    }
    const size_t from = local_index(parts_[x.from_part].positions, at.issue_after);
    const size_t to = local_index(parts_[x.to_part].positions, at.destination_at);
    cuts_[x.from_part].insert(from + 1);
    cuts_[x.to_part].insert(to);
    // A source rewritten later in the micro-batch (an in-place sum into a
    // gradient another stage read): the segment that rewrites it starts
    // once the copy is made.
    std::optional<size_t> rewrite;
    if (rewritten) {
      rewrite = local_index(parts_[x.from_part].positions, at.source_rewritten_at);
      cuts_[x.from_part].insert(*rewrite);
    }
    pulls_.push_back({t, {x.from_part, from}, {x.to_part, to}, rewrite});
    layout_.per_instance[x.to_part].insert(storage(x.to_part, x.to));
    if (persistent(x.from_part, x.from)) {
      // Each micro-batch's own copy of it only if each makes it whole (a
      // gradient, an input): state carried across micro-batches has one.
      const MemoryCategory category = category_of(x.from_part, x.from);
      if (category != MemoryCategory::Gradients && category != MemoryCategory::Inputs)
        return cannot(name(x.from_part, x.from) +
                      ", state carried from one micro-batch to the next, is read by another device");
      layout_.per_instance[x.from_part].insert(storage(x.from_part, x.from));
    }
    return {};
  }
  // An activation of forward or backward (in the arena, made before the
  // optimizer phase): each instance has its own.
  bool made_per_micro_batch(size_t part, ValueId local) const {
    const ValueStorage* s = parts_[part].executor->plan().find(local);
    return s != nullptr && s->kind == ValueStorage::Kind::Arena && s->first < forward_backward_[part];
  }
  MemoryCategory category_of(size_t part, ValueId local) const {
    const Plan& plan = parts_[part].executor->plan();
    const ValueStorage* s = plan.find(local);
    return s != nullptr && s->kind == ValueStorage::Kind::Persistent ? plan.persistent[s->persistent].category
                                                                     : MemoryCategory::Activations;
  }

  // The optimizer runs once per step, on the first instance: it may read
  // nothing each micro-batch has its own of.
  Result<void> check_optimizer_reads() const {
    for (size_t t : layout_.after_step) {
      const ExecutorTransfer& x = transfers_[t];
      if (!persistent(x.from_part, x.from) ||
          layout_.per_instance[x.from_part].count(storage(x.from_part, x.from)))
        return cannot("the optimizer reads " + name(x.from_part, x.from) +
                      ", which each micro-batch computes");
    }
    for (size_t p = 0; p < parts_.size(); ++p)
      for (size_t local = forward_backward_[p]; local < parts_[p].positions.size(); ++local)
        for (ValueId v : parts_[p].executor->reads(local))
          if (v != kNoValue &&
              (layout_.per_instance[p].count(storage(p, v)) > 0 || made_per_micro_batch(p, v)))
            return cannot("the optimizer reads " + name(p, v) + ", which each micro-batch has its own of");
    return {};
  }

  void make_stages() {
    std::vector<size_t> order;
    for (size_t p = 0; p < parts_.size(); ++p)
      if (forward_backward_[p] > 0) order.push_back(p);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return parts_[a].positions.front() < parts_[b].positions.front(); });
    for (size_t p : order) {
      const DeviceExecutor& e = *parts_[p].executor;
      const size_t n = forward_backward_[p];
      std::set<size_t>& cuts = cuts_[p];
      cuts.insert(0);
      cuts.insert(n);
      for (size_t i = 0; i < n; ++i)
        if (e.phase(i) != TDM_PHASE_FORWARD) {
          cuts.insert(i);
          break;
        }
      std::vector<size_t> bounds(cuts.begin(), cuts.upper_bound(n));
      std::vector<PipelineSegment> segments;
      for (size_t g = 0; g + 1 < bounds.size(); ++g)
        segments.push_back(
            {e.phase(bounds[g]) != TDM_PHASE_FORWARD, static_cast<double>(bounds[g + 1] - bounds[g]), {}});
      layout_.stage_part.push_back(p);
      layout_.bounds.push_back(std::move(bounds));
      layout_.shape.stages.push_back(std::move(segments));
    }
    // Feeds of a part with no forward or backward: nothing there reads them.
    std::erase_if(layout_.feeds, [&](const PipelineLayout::Feed& f) {
      return layout_.stage_of(f.part) == layout_.stage_part.size();
    });
  }

  SegmentRef segment_of(const PartNode& n) const {
    const size_t stage = layout_.stage_of(n.part);
    const std::vector<size_t>& b = layout_.bounds[stage];
    const size_t g = static_cast<size_t>(std::upper_bound(b.begin(), b.end(), n.local) - b.begin()) - 1;
    return {stage, g};
  }

  void connect_pulls() {
    for (const auto& [t, from, to, rewrite] : pulls_) {
      const SegmentRef producer = segment_of(from), consumer = segment_of(to);
      auto& after = layout_.shape.stages[consumer.stage][consumer.segment].after;
      if (std::find(after.begin(), after.end(), producer) == after.end()) after.push_back(producer);
      PipelineLayout::Pull pull{t, producer, consumer, kNoSegment};
      if (rewrite) {
        pull.rewritten = segment_of({from.part, *rewrite}).segment;
        layout_.shape.stages[producer.stage][pull.rewritten].copied_first.push_back(
            {consumer, producer.segment});
      }
      layout_.pulls.push_back(pull);
    }
  }

  struct PendingPull {
    size_t transfer;
    PartNode from, to;
    std::optional<size_t> rewrite;  // the producer's node that rewrites the source
  };
  const std::vector<ExecutorPart>& parts_;
  const std::vector<ExecutorTransfer>& transfers_;
  const ComposedExecutor& composed_;
  const PipelineRequest& request_;
  PipelineLayout layout_;
  std::vector<size_t> forward_backward_;               // per part: its nodes before the optimizer
  std::vector<std::map<ValueId, ValueId>> global_of_;  // per part: local value -> global
  std::vector<std::set<size_t>> cuts_;                 // per part: where segments begin
  std::vector<PendingPull> pulls_;
};

}  // namespace

size_t PipelineLayout::chunks() const {
  return model_chunks(shape, order, micro_batches);
}

size_t PipelineLayout::stage_of(size_t part) const {
  auto it = std::find(stage_part.begin(), stage_part.end(), part);
  return static_cast<size_t>(it - stage_part.begin());
}

Result<PipelineLayout> plan_pipeline(const ComposedExecutor& composed, const PipelineRequest& request) {
  if (request.micro_batches < 2) return cannot("one micro-batch: nothing to pipeline");
  return Analysis(composed, request).run();
}

}  // namespace tandem::host::exec
