#include "program/step_runner.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace tandem::host::program {

StepRunner::StepRunner(Program& program)
    : program_(program), run_(std::make_unique<ExecutorRun>(program.model(), program.executor())) {}

tdm_step_info StepRunner::info(int64_t step, uint32_t micro) const {
  run_->set_step(step);
  return tdm_step_info{sizeof(tdm_step_info), step, micro, program_.micro_batches(), run_->as_c()};
}

void StepRunner::set_run_directory(std::string directory, bool writes) {
  run_->set_run_directory(std::move(directory), writes);
}

void StepRunner::set_make_whole(ExecutorRun::MakeWhole make_whole, bool takes_part) {
  run_->set_make_whole(std::move(make_whole), takes_part);
}

Result<void> StepRunner::end_run(int64_t steps) {
  return program_.features().run_end(info(steps, 0));
}

Result<void> StepRunner::begin_micro_batch(int64_t step, uint32_t micro, double lr) {
  exec::Executor& ex = program_.executor();
  const lowering::ModelGraph& model = program_.model();
  if (model.dropout_step != kNoValue) {
    const int64_t offset = dropout_offset(step, micro);
    if (auto r = ex.write(model.dropout_step, &offset, sizeof offset); !r) return r;
  }
  if (micro != 0) return {};
  const auto rate = static_cast<float>(lr);
  if (auto r = ex.write(model.lr, &rate, sizeof rate); !r) return r;
  if (model.step != kNoValue) {
    const auto t = static_cast<int32_t>(step + 1);
    if (auto r = ex.write(model.step, &t, sizeof t); !r) return r;
  }
  return program_.features().step_begin(info(step, micro));
}

int64_t StepRunner::dropout_offset(int64_t step, uint32_t micro) const {
  return (step * program_.micro_batches() + micro) * program_.data_world() + program_.data_rank();
}

void StepRunner::set_ranks(std::function<Result<int32_t>(int32_t)> max_over_ranks) {
  check_skips_ = !program_.features().skip_deciders().empty();
  run_->set_ranks(std::move(max_over_ranks));
}

Result<void> StepRunner::end_micro_batch(int64_t step, uint32_t micro) {
  return program_.features().micro_batch_end(info(step, micro));
}

Result<void> StepRunner::optimizer_step(int64_t step) {
  exec::Executor& ex = program_.executor();
  const lowering::ModelGraph& model = program_.model();
  FeatureSet& features = program_.features();
  const tdm_step_info i = info(step, program_.micro_batches() - 1);
  if (auto r = features.gradients_ready(i); !r) return r;
  auto skip = features.before_optimizer_step(i);
  if (!skip) return skip.error();
  if (check_skips_)
    if (auto r = skip_agreed(step, *skip); !r) return r;
  if (*skip) {  // only what must run anyway (e.g. clearing accumulators)
    for (size_t n : program_.run_on_skip())
      if (auto r = ex.run(n, n + 1); !r) return r;
    return features.step_end(i);
  }
  if (model.clip_coef != kNoValue) {
    if (auto r = ex.run(model.optimizer_begin, program_.clip_point()); !r) return r;
    float norm_sq = 0;  // read before any later optimizer node can reuse its bytes
    if (auto r = ex.read(model.grad_norm_sq, &norm_sq, sizeof norm_sq); !r) return r;
    const float norm = std::sqrt(norm_sq);
    const auto coef = static_cast<float>(std::min(1.0, program_.spec().train.clip_grad_norm / (norm + 1e-6)));
    if (auto r = ex.write(model.clip_coef, &coef, sizeof coef); !r) return r;
    if (auto r = ex.run(program_.clip_point(), ex.node_count()); !r) return r;
  } else if (auto r = ex.run(model.optimizer_begin, ex.node_count()); !r) {
    return r;
  }
  return features.step_end(i);
}

Result<void> StepRunner::skip_agreed(int64_t step, bool skip) const {
  // Every rank gets the same answers, so all ask the second question or none:
  // one collective a step, two on a step some rank skips.
  auto some_skip = run_->max_over_ranks(skip ? 1 : 0);
  if (!some_skip) return some_skip.error();
  if (*some_skip == 0) return {};
  auto some_step = run_->max_over_ranks(skip ? 0 : 1);
  if (!some_step) return some_step.error();
  if (*some_step == 0) return {};
  return make_error(
      "step " + std::to_string(step + 1) + ": feature(s) " + program_.features().skip_deciders() +
          " skipped the optimizer step on some ranks and not on others, so the ranks would no " +
          "longer hold one model. A feature that judges this rank's gradients (its slices of the " +
          "split layers, or its own before they are averaged) must decide with the other ranks " +
          "through tdm_host_api.run_ranks_max (ABI 1.10), as amp does. The run stops here " +
          "(checkpoints already written stay as they are); update or fix the feature plugin, or " +
          "train without it",
      TDM_UNSUPPORTED);
}

}  // namespace tandem::host::program
