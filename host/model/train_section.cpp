#include "model/train_section.hpp"

#include <string>

#include "model/checkpoint_every.hpp"

namespace tandem::host::model {
namespace {

// checkpoint_every = 500 (steps) or a text: "15min", "500 steps, 15min".
void read_checkpoint_every(Reader& r, const toml::table& t, CheckpointEvery& every) {
  const toml::node* node = t.get("checkpoint_every");
  if (node == nullptr) return;
  std::string text;
  if (const auto* steps = node->as_integer()) {
    text = std::to_string(steps->get());
  } else if (!r.get(t, "checkpoint_every", text)) {
    return;
  }
  auto parsed = parse_checkpoint_every(text);
  r.check(t, "checkpoint_every", parsed.ok(),
          "[train] checkpoint_every: " + (parsed ? std::string() : parsed.error().message));
  if (parsed) every = *parsed;
}

// Every [train] value in its range, each error at the key's own place.
void check_train(Reader& r, const toml::table& t, const TrainSpec& s) {
  const auto at_least = [&](const char* key, double value, double low, const char* why) {
    r.check(t, key, value >= low, std::string("[train] ") + key + " = " + number_text(value) + ": " + why);
  };
  r.check(t, "lr", s.lr > 0, "[train] lr = " + number_text(s.lr) + ": must be positive");
  r.check(t, "batch_size", s.batch_size > 0,
          "[train] batch_size = " + std::to_string(s.batch_size) + ": must be positive");
  at_least("epochs", double(s.epochs), 0, "must not be negative");
  at_least("steps", double(s.steps), 0, "must not be negative (0: train for `epochs`)");
  r.check(t, "epochs", s.epochs > 0 || s.steps > 0, "[train] needs epochs > 0 or steps > 0");
  at_least("pipeline_microbatches", double(s.pipeline_microbatches), 0,
           "must not be negative (0: as [features.grad_accum] says)");
  r.check(t, "pipeline_microbatches",
          s.pipeline_microbatches == 0 || (s.batch_size > 0 && s.batch_size % s.pipeline_microbatches == 0),
          "[train] pipeline_microbatches = " + std::to_string(s.pipeline_microbatches) +
              " does not divide [train] batch_size = " + std::to_string(s.batch_size) +
              "; choose a divisor of the batch size");
  at_least("warmup_steps", double(s.warmup_steps), 0, "must not be negative");
  at_least("step_size", double(s.step_size), 0, "must not be negative");
  r.check(t, "step_size", s.schedule != "step" || s.step_size > 0,
          "[train] schedule = \"step\" needs step_size > 0");
  at_least("momentum", s.momentum, 0, "must not be negative");
  at_least("dampening", s.dampening, 0, "must not be negative");
  at_least("weight_decay", s.weight_decay, 0, "must not be negative");
  at_least("clip_grad_norm", s.clip_grad_norm, 0, "must not be negative (0: no clipping)");
  at_least("pipeline_parallel", double(s.pipeline_parallel), 0, "must not be negative (0 or 1: no pipeline)");
  r.check(t, "pipeline_cut", s.pipeline_cut.empty() || s.pipeline_parallel > 1,
          "[train] pipeline_cut says where pipeline stages begin, but the run has none: set "
          "pipeline_parallel = 2 or more, or remove pipeline_cut");
  at_least("tensor_parallel", double(s.tensor_parallel), 0,
           "must not be negative (0: every rank of the run)");
  r.check(t, "zero", s.zero >= 0 && s.zero <= 3,
          "[train] zero = " + std::to_string(s.zero) +
              ": must be 0 (none), 1 (shard the optimizer state over the data-parallel ranks), 2 (the "
              "gradients too) or 3 (the parameters too)");
  at_least("min_lr", s.min_lr, 0, "must not be negative");
  r.check(t, "gamma", s.gamma > 0, "[train] gamma = " + number_text(s.gamma) + ": must be positive");
  r.check(t, "epsilon", s.epsilon > 0, "[train] epsilon = " + number_text(s.epsilon) + ": must be positive");
  r.check(t, "beta1", s.beta1 >= 0 && s.beta1 < 1,
          "[train] beta1 = " + number_text(s.beta1) + ": must be in [0, 1)");
  r.check(t, "beta2", s.beta2 >= 0 && s.beta2 < 1,
          "[train] beta2 = " + number_text(s.beta2) + ": must be in [0, 1)");
  r.check(t, "log_every", s.log_every > 0,
          "[train] log_every = " + std::to_string(s.log_every) + ": must be positive");
  r.check(t, "keep_checkpoints", s.keep_checkpoints > 0,
          "[train] keep_checkpoints = " + std::to_string(s.keep_checkpoints) + ": must be positive");
}

}  // namespace

void read_train(Reader& r, const toml::table& t, TrainSpec& s) {
  r.check_keys(t, "[train]",
               {"optimizer",
                "lr",
                "momentum",
                "dampening",
                "nesterov",
                "weight_decay",
                "beta1",
                "beta2",
                "epsilon",
                "schedule",
                "warmup_steps",
                "step_size",
                "gamma",
                "min_lr",
                "batch_size",
                "epochs",
                "steps",
                "clip_grad_norm",
                "seed",
                "log_every",
                "keep_checkpoints",
                "optimizer_device",
                "placement",
                "checkpoint_every",
                "tensor_parallel",
                "zero",
                "zero_overlap",
                "comm",
                "pipeline",
                "pipeline_microbatches",
                "pipeline_parallel",
                "pipeline_cut"});
  r.get_choice(t, "optimizer", s.optimizer, {"sgd", "adamw"});
  r.get(t, "lr", s.lr);
  r.get(t, "momentum", s.momentum);
  r.get(t, "dampening", s.dampening);
  r.get(t, "nesterov", s.nesterov);
  r.get(t, "weight_decay", s.weight_decay);
  r.get(t, "beta1", s.beta1);
  r.get(t, "beta2", s.beta2);
  r.get(t, "epsilon", s.epsilon);
  r.get_choice(t, "schedule", s.schedule, {"constant", "step", "cosine"});
  r.get(t, "warmup_steps", s.warmup_steps);
  r.get(t, "step_size", s.step_size);
  r.get(t, "gamma", s.gamma);
  r.get(t, "min_lr", s.min_lr);
  r.get(t, "batch_size", s.batch_size);
  r.get(t, "epochs", s.epochs);
  r.get(t, "steps", s.steps);
  r.get(t, "clip_grad_norm", s.clip_grad_norm);
  r.get(t, "tensor_parallel", s.tensor_parallel);
  r.get(t, "zero", s.zero);
  r.get(t, "zero_overlap", s.zero_overlap);
  r.get(t, "comm", s.comm);
  r.get(t, "pipeline", s.pipeline);
  r.get(t, "pipeline_microbatches", s.pipeline_microbatches);
  r.get(t, "pipeline_parallel", s.pipeline_parallel);
  r.get(t, "pipeline_cut", s.pipeline_cut);
  int64_t seed = static_cast<int64_t>(s.seed);
  r.get(t, "seed", seed);
  s.seed = static_cast<uint64_t>(seed);
  r.get(t, "log_every", s.log_every);
  r.get(t, "keep_checkpoints", s.keep_checkpoints);
  read_checkpoint_every(r, t, s.checkpoint_every);
  r.get(t, "optimizer_device", s.optimizer_device);
  r.get_choice(t, "placement", s.placement, {"auto", "pinned", "strict"});
  check_train(r, t, s);
}

}  // namespace tandem::host::model
