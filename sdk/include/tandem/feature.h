/* Tandem SDK — feature plugins: graph passes and step hooks.
 *
 * A feature (gradient accumulation, activation checkpointing, mixed
 * precision, quantization, ...) is configured by its `[features.NAME]`
 * section. The host creates one instance per training run, runs its graph
 * pass once, at the stage `pass_stage` names, and calls its step hooks on
 * its main thread (the one that calls create). Every function here is
 * optional (NULL) except create and destroy (sdk/ABI.md rules 39 and 42-45).
 */
#ifndef TANDEM_FEATURE_H
#define TANDEM_FEATURE_H

#include "tandem/graph.h"
#include "tandem/host_api.h"
#include "tandem/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_feature tdm_feature; /* opaque, plugin-owned */

/* When the graph pass runs. */
typedef int32_t tdm_pass_stage;
enum {
  TDM_PASS_BEFORE_AUTODIFF = 0, /* sees the forward graph only (casts, fake quant) */
  TDM_PASS_AFTER_AUTODIFF = 1,  /* sees forward + backward (recompute segments) */
  TDM_PASS_AFTER_OPTIMIZER = 2  /* sees the whole step, optimizer updates included */
};

typedef struct tdm_step_info {
  uint32_t struct_size;
  int64_t step;           /* optimizer steps taken so far */
  uint32_t micro_batch;   /* index within the step, 0-based */
  uint32_t micro_batches; /* per optimizer step (1 without accumulation) */
  tdm_run* run;           /* for host->run_scalar_get / run_scalar_set */
} tdm_step_info;

typedef struct tdm_feature_api {
  uint32_t struct_size;
  tdm_pass_stage pass_stage;
  /* NULL-terminated lists of feature names this one needs present, and
   * cannot run with. The host checks both before training and explains a
   * conflict. Either may be NULL. Owned by the plugin, static. */
  const char* const* requires_features;
  const char* const* conflicts_with;

  /* One instance per run, configured by its section (valid during the call). */
  tdm_status (*create)(const tdm_config* section, tdm_feature** out);
  void (*destroy)(tdm_feature* feature);

  /* Rewrites or annotates the graph through host->graph. */
  tdm_status (*graph_pass)(tdm_feature* feature, tdm_graph* graph);

  /* Step hooks, in the order they fire within one optimizer step:
   * step_begin, then per micro-batch micro_batch_end, then gradients_ready
   * (all gradients of the step are final), before_optimizer_step (set *skip
   * to 1 to skip the update, e.g. on overflow), step_end. */
  tdm_status (*on_step_begin)(tdm_feature* feature, const tdm_step_info* info);
  tdm_status (*on_micro_batch_end)(tdm_feature* feature, const tdm_step_info* info);
  tdm_status (*on_gradients_ready)(tdm_feature* feature, const tdm_step_info* info);
  tdm_status (*before_optimizer_step)(tdm_feature* feature, const tdm_step_info* info, int32_t* skip);
  tdm_status (*on_step_end)(tdm_feature* feature, const tdm_step_info* info);

  /* ---- since ABI 1.2 (check struct_size, then the pointer) ---- */
  /* Gradient accumulation: how many micro-batches (batches of the model
   * file's batch_size) make one optimizer step. The host then runs forward
   * and backward that many times, firing on_micro_batch_end after each, and
   * the optimizer once. 0 or 1 = no accumulation; at most one enabled
   * feature may answer more than 1. Called once, after the graph passes.
   * Optional. */
  uint32_t (*micro_batches)(tdm_feature* feature);

  /* ---- since ABI 1.3 (check struct_size, then the pointer) ---- */
  /* Gradient accumulation by micro-batch size: how many samples one
   * micro-batch holds when the feature splits each batch (the model file's
   * batch_size, which must be a multiple) into micro-batches that fit. The
   * host then builds the graph for that many samples, feeds batches of that
   * size, and micro_batches() must answer batch_size / micro_batch_size.
   * 0 = the model file's batch_size. Called once, right after create and
   * before any graph exists. Optional.
   * For it, since ABI 1.3 the host adds read-only keys under "tandem." to
   * every feature's configuration: "tandem.batch_size" (per rank); since
   * ABI 1.11 also "tandem.wide_products" = "1" when every backend the run
   * may use computes linear and linear_grad_weight from bf16/f16 operands
   * into f32 outputs (ops.md, "Wide outputs"), "0" otherwise: a pass that
   * inserts such nodes does so only under "1". */
  uint32_t (*micro_batch_size)(tdm_feature* feature);

  /* ---- since ABI 1.12 (check struct_size, then the pointer) ---- */
  /* Once, after the run's last optimizer step and its last checkpoint, or
   * after the checkpoint a stop by signal (Ctrl-C) saved; not when the run
   * fails. info->step is the number of steps taken. The host's whole-tensor
   * functions (run_tensor_read, run_save_tensors; host_api.h) work here as
   * in on_step_begin and on_step_end: a feature writes its final files now.
   * A failing on_run_end fails the run (exit 4), its checkpoints kept.
   * Optional. */
  tdm_status (*on_run_end)(tdm_feature* feature, const tdm_step_info* info);
} tdm_feature_api;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TANDEM_FEATURE_H */
