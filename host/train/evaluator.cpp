#include "train/evaluator.hpp"

#include <chrono>
#include <cmath>

#include "data/loader.hpp"
#include "train/checkpointing.hpp"
#include "util/logger.hpp"

namespace tandem::host::train {

int64_t count_correct(const std::vector<float>& logits, const std::vector<int32_t>& labels, int64_t rows,
                      int64_t classes) {
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best]) best = c;
    correct += best == labels[static_cast<size_t>(r)] ? 1 : 0;
  }
  return correct;
}

namespace {

void keep(Evaluator::Outputs& out, const lowering::ModelGraph& m, const data::Batch& batch,
          const std::vector<float>& logits) {
  if (out.samples == 0) {
    const TensorType& input = m.graph.value(m.input)->type;
    out.input_dtype = input.dtype;
    out.input_dims.assign(input.dims.begin() + 1, input.dims.end());
    const std::vector<int64_t>& l = m.graph.value(m.logits)->type.dims;
    out.logits_dims.assign(l.begin() + 1, l.end());
  }
  const auto* bytes = static_cast<const std::byte*>(batch.input_data());
  out.inputs.insert(out.inputs.end(), bytes, bytes + batch.input_bytes());
  out.logits.insert(out.logits.end(), logits.begin(), logits.end());
  out.samples += batch.size;
}

}  // namespace

Result<program::Program*> Evaluator::for_batch(int64_t batch) {
  auto it = compiled_.find(batch);
  if (it != compiled_.end()) return it->second.get();
  program::ProgramOptions o;
  o.mode = lowering::Mode::Eval;
  o.batch = batch;
  o.int8 = int8_.empty() ? nullptr : &int8_;
  o.group = group_;
  o.placement = placement_;  // the same pins as training, so every parameter is found where it lives
  o.open_devices = devices_;
  auto program = program::Program::build(spec_, device_, registry_, std::move(o));
  if (!program) return program.error();
  const lowering::ModelGraph& model = (*program)->model();
  exec::ExecutorOptions options;
  options.collectives = collectives_;
  options.data_collectives = zero_collectives_;
  options.stage_link = stage_link_;
  for (const auto& [name, pointer] : shared_)  // the training graph also has optimizer state
    if (model.graph.value_by_name(name) != nullptr) {
      options.external[name] = pointer;
      if (streamed_.count(name) > 0) options.streamed.insert(name);
    }
  // The logits only where they are kept (predictions) or counted here.
  options.outputs = {"loss"};
  if (outputs_ != nullptr || model.correct == kNoValue)
    options.outputs.push_back(model.graph.value(model.logits)->name);
  else
    options.outputs.push_back(model.graph.value(model.correct)->name);
  if (auto r = (*program)->allocate(std::move(options)); !r) return r.error();
  program::Program& p = *(compiled_[batch] = std::move(*program));
  if (shared_.empty()) {
    // The first eval program owns the parameters; later ones share them.
    const Graph& g = p.model().graph;
    for (size_t i = 0; i < g.value_count(); ++i) {
      const Value& v = *g.value_at(i);
      if (v.kind == TDM_VALUE_PARAMETER || v.kind == TDM_VALUE_STATE)
        shared_[v.name] = p.executor().device_pointer(v.id);
    }
  }
  return &p;
}

Result<void> Evaluator::load(const checkpoint::Checkpoint& cp, const std::string& source) {
  auto p = for_batch(spec_.train.batch_size);
  if (!p) return p.error();
  return restore_tensors((*p)->model().graph, (*p)->executor(), cp, true, source,
                         (*p)->model().lora_adapters);
}

Result<EvalResult> Evaluator::evaluate(const data::Dataset& set, const data::Transforms& transforms,
                                       int threads) {
  if (batch_ == 0) batch_ = spec_.train.batch_size;
  for (;;) {
    auto result = evaluate_in_batches(set, transforms, threads, batch_);
    if (result || result.error().status != TDM_OUT_OF_MEMORY || !borrowed_ || batch_ == 1) return result;
    const int64_t smaller = batch_ / 2;
    log_warning("evaluation did not fit beside training with batches of " + std::to_string(batch_) + " (" +
                result.error().message + "): evaluating in batches of " + std::to_string(smaller) +
                " instead (same loss and accuracy, per sample)");
    compiled_.clear();  // the larger batches' activations go back to the devices
    batch_ = smaller;
  }
}

Result<EvalResult> Evaluator::evaluate_in_batches(const data::Dataset& set,
                                                  const data::Transforms& transforms, int threads,
                                                  int64_t batch) {
  data::DataLoader loader(
      set, {.batch_size = batch, .shuffle = false, .threads = threads, .transforms = transforms});
  loader.start_epoch(0);
  EvalResult result;
  double loss_sum = 0;
  int64_t correct = 0, predictions = 0;
  std::vector<float> logits;
  while (auto batch = loader.next()) {
    auto p = for_batch(batch->size);
    if (!p) return p.error();
    const lowering::ModelGraph& m = (*p)->model();
    exec::Executor& ex = (*p)->executor();
    const auto start = std::chrono::steady_clock::now();
    if (auto r = ex.write(m.input, batch->input_data(), batch->input_bytes()); !r) return r.error();
    if (auto r = ex.write(m.labels, batch->labels.data(), batch->labels.size() * sizeof(int32_t)); !r)
      return r.error();
    if (auto r = ex.run(); !r) return r.error();
    // One label per sample, or per token of a language model.
    const int64_t classes = m.graph.value(m.logits)->type.dims.back(), rows = int64_t(batch->labels.size());
    const bool on_device = outputs_ == nullptr && m.correct != kNoValue;
    float loss = 0, right = 0;
    if (on_device) {
      if (auto r = ex.read(m.correct, &right, sizeof right); !r) return r.error();
    } else {
      logits.resize(static_cast<size_t>(rows * classes));
      if (auto r = ex.read(m.logits, logits.data(), logits.size() * sizeof(float)); !r) return r.error();
    }
    if (auto r = ex.read(m.loss, &loss, sizeof loss); !r) return r.error();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.compute_seconds += seconds;
    result.batch_seconds.push_back(seconds);
    if (outputs_ != nullptr) keep(*outputs_, m, *batch, logits);
    loss_sum += static_cast<double>(loss) * static_cast<double>(batch->size);
    correct += on_device ? std::llround(right) : count_correct(logits, batch->labels, rows, classes);
    predictions += rows;
    result.samples += batch->size;
  }
  if (result.samples > 0) {
    result.loss = loss_sum / static_cast<double>(result.samples);
    result.accuracy = static_cast<double>(correct) / static_cast<double>(predictions);
  }
  return result;
}

}  // namespace tandem::host::train
