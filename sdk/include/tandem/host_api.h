/* Tandem SDK — services the host passes to every plugin (sdk/ABI.md rule 15).
 *
 * Plugins never link the host: logging, error reporting, configuration
 * lookup, host scratch memory and the graph API all come from this table,
 * which the host passes to tdm_plugin_entry. The table and everything it
 * points to stay valid until the process exits.
 */
#ifndef TANDEM_HOST_API_H
#define TANDEM_HOST_API_H

#include "tandem/graph.h"
#include "tandem/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque handle on a running training step, given to feature step hooks. */
typedef struct tdm_run tdm_run;

/* One tensor of a file run_save_tensors writes (since ABI 1.12). */
typedef struct tdm_saved_tensor {
  uint32_t struct_size;
  const char* name;       /* its name in the file */
  const char* value_name; /* the run value whose contents it holds */
} tdm_saved_tensor;

typedef struct tdm_host_api {
  uint32_t struct_size;
  uint32_t abi_major; /* the host's ABI version */
  uint32_t abi_minor;
  /* Opaque host context for this plugin; pass it back as `ctx` to every
   * function below. It identifies the plugin in log lines and errors. */
  void* ctx;

  /* Writes one log line, attributed to the plugin. Thread-safe. `message`
   * is copied before the call returns. */
  void (*log)(void* ctx, tdm_log_level level, const char* message);

  /* Records the message explaining the failing status the plugin is about to
   * return from the current call on this thread. printf-style; the host
   * copies the text. Say what failed, which file/op/device, and what the user
   * can do. Thread-safe: each thread has its own slot. */
  void (*set_error)(void* ctx, tdm_status code, const char* format, ...)
#if defined(__GNUC__)
      __attribute__((format(printf, 3, 4)))
#endif
      ;

  /* Looks up `key` in the host's configuration. The one key it holds today
   * is "threads" (set by --threads N, N > 0); every other key, model-file
   * ones such as "train.batch_size" and feature options such as
   * "features.amp.dtype" included, answers TDM_NOT_FOUND (sdk/ABI.md
   * rule 40; a feature gets its options in create's section). On entry
   * *size is the capacity of `buffer`; on return it is the length the value
   * needs including the terminating NUL. Returns TDM_NOT_FOUND when the key
   * is absent, TDM_INVALID_ARGUMENT when the buffer is too small (nothing
   * written but *size). Thread-safe. */
  tdm_status (*config_get)(void* ctx, const char* key, char* buffer, size_t* size);

  /* Host-visible scratch memory, 64-byte aligned unless `alignment` asks for
   * more (a power of two). Freed with scratch_free by the plugin
   * (sdk/ABI.md rule 16: the host allocated, the host frees, called by
   * whoever holds it). NULL on exhaustion. Thread-safe. */
  void* (*scratch_alloc)(void* ctx, size_t bytes, size_t alignment);
  void (*scratch_free)(void* ctx, void* pointer);

  /* Graph access for feature passes. */
  const tdm_graph_api* graph;

  /* Scalars of a running step, by value name (e.g. "amp.loss_scale",
   * "amp.found_inf", "loss"). Used by feature step hooks. Values are read
   * and written as double whatever their dtype; reading waits for the
   * value's producer to finish. TDM_NOT_FOUND for an unknown name. Must be
   * called only from within a step hook on the thread that runs it. */
  tdm_status (*run_scalar_get)(void* ctx, tdm_run* run, const char* value_name, double* out);
  tdm_status (*run_scalar_set)(void* ctx, tdm_run* run, const char* value_name, double value);

  /* Since ABI 1.10. Replaces *value with its maximum over every rank of
   * the run (the processes of data or tensor parallelism), so that the
   * ranks' feature hooks take one decision from what each rank sees: amp
   * skips a step on every rank when any rank's gradients overflowed, as a
   * rank holds only its slices of the split layers' gradients, or (data
   * parallelism) only its own before they are averaged. In a single process
   * *value stays as it is. Collective: every rank must call it at the same
   * point of the same step hook, or the ranks wait on each other until the
   * run's collective timeout fails them. Only from within a step hook, on
   * the thread that runs it. */
  tdm_status (*run_ranks_max)(void* ctx, tdm_run* run, int32_t* value);

  /* ---- since ABI 1.12: whole tensors at a step boundary ---- */
  /* A feature reads and writes whole persistent values of the training
   * graph (parameters and state values, by name) from on_step_begin,
   * on_step_end and on_run_end only: between optimizer steps, when no
   * kernel is using them. The host copies through host memory from or to
   * whatever device holds the value. Each rank sees the tensor as it holds
   * it: under tensor parallelism or ZeRO stage 3 a parameter is this rank's
   * slice or shard, and run_tensor_desc says its shape. Anywhere else
   * (another hook, a kept tdm_run*, another thread) these are refused with
   * TDM_INVALID_ARGUMENT; an unknown name, or an activation (which does not
   * outlive its step), is TDM_NOT_FOUND (sdk/ABI.md rule 44). */

  /* The value's dtype and shape. out->dims points at host memory valid
   * until the run ends. */
  tdm_status (*run_tensor_desc)(void* ctx, tdm_run* run, const char* value_name, tdm_tensor_desc* out);
  /* Copies the whole value, row-major, into `buffer`; `bytes` must be its
   * size exactly (TDM_INVALID_ARGUMENT otherwise, nothing copied). */
  tdm_status (*run_tensor_read)(void* ctx, tdm_run* run, const char* value_name, void* buffer, size_t bytes);
  /* Overwrites the whole value from `buffer` (`bytes` its size exactly).
   * The next step's kernels see the new contents. */
  tdm_status (*run_tensor_write)(void* ctx, tdm_run* run, const char* value_name, const void* buffer,
                                 size_t bytes);
  /* Writes the listed values into one safetensors file `file_name` in the
   * run directory (a plain name ending in ".safetensors", no directory
   * part), atomically: a temporary file beside it, fsync, rename, so a
   * crash leaves the previous version whole. Each tensor is stored under
   * its `name` (e.g. a parameter's name for weights `tandem eval` reads)
   * with the bytes of run value `value_name`. In a run of several ranks it
   * is collective: every rank calls it with the same list at the same point
   * of the same hook; the host gathers tensor-parallel slices and ZeRO
   * shards as it does for checkpoints, so the file holds whole tensors, and
   * the first rank writes it (the others return TDM_OK). A command without
   * a run directory (tandem bench, tandem plan) answers TDM_UNSUPPORTED. */
  tdm_status (*run_save_tensors)(void* ctx, tdm_run* run, const char* file_name,
                                 const tdm_saved_tensor* tensors, size_t count);
} tdm_host_api;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TANDEM_HOST_API_H */
