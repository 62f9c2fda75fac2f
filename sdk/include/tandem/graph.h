/* Tandem SDK — the host's graph, as feature plugins see it during a pass.
 *
 * A graph is a list of nodes (ops from the catalog, sdk/ops.md) connected by
 * values (tensors with a shape and dtype). The host owns the graph; a feature
 * plugin reads and rewrites it only inside its graph_pass, through this table
 * (reached as tdm_host_api.graph). Ids are stable for the whole pass; a removed
 * node's id is never reused.
 *
 * Lifetime of returned pointers: strings and arrays returned through out
 * parameters are owned by the host and stay valid until the graph is next
 * modified or the pass returns, whichever comes first.
 * Threading: a graph may be used by one thread at a time.
 */
#ifndef TANDEM_GRAPH_H
#define TANDEM_GRAPH_H

#include "tandem/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_graph tdm_graph; /* opaque, host-owned */
typedef int64_t tdm_node_id;
typedef int64_t tdm_value_id;
#define TDM_NO_VALUE ((tdm_value_id)-1)

/* Which part of the training step a node belongs to. */
typedef int32_t tdm_phase;
enum { TDM_PHASE_FORWARD = 0, TDM_PHASE_BACKWARD = 1, TDM_PHASE_OPTIMIZER = 2 };

/* Where a value comes from. */
typedef int32_t tdm_value_kind;
enum {
  TDM_VALUE_ACTIVATION = 0, /* produced by a node, lives within a step */
  TDM_VALUE_PARAMETER = 1,  /* trained weight, persistent */
  TDM_VALUE_INPUT = 2,      /* fed by the data pipeline (images, labels) */
  TDM_VALUE_STATE = 3,      /* persistent non-trained state: optimizer moments,
                               running statistics, loss scale */
  TDM_VALUE_GRADIENT = 4    /* gradient of a parameter */
};

typedef struct tdm_node_info {
  uint32_t struct_size;
  tdm_node_id id;
  const char* op;    /* catalog op name */
  const char* name;  /* unique node name, e.g. "fc1" or "fc1.grad_weight" */
  const char* layer; /* model-file layer this node came from */
  tdm_phase phase;
  const char* device; /* "onednn:0", or NULL while unplaced */
  size_t n_inputs;
  size_t n_outputs;
  size_t n_attrs;
} tdm_node_info;

typedef struct tdm_value_info {
  uint32_t struct_size;
  tdm_value_id id;
  const char* name;
  tdm_value_kind kind;
  tdm_tensor_desc desc;
  tdm_node_id producer; /* -1 for graph inputs, parameters and state */
} tdm_value_info;

/* What node_insert creates: one node and its output values. */
typedef struct tdm_node_spec {
  uint32_t struct_size;
  const char* op;
  const char* name;  /* must be unique in the graph */
  const char* layer; /* layer it belongs to; NULL = same as `anchor` */
  tdm_phase phase;
  const tdm_attr* attrs;
  size_t n_attrs;
  const tdm_value_id* inputs; /* TDM_NO_VALUE for an absent optional input */
  size_t n_inputs;
  const tdm_tensor_desc* outputs; /* shape and dtype of each output */
  size_t n_outputs;
  tdm_node_id anchor; /* the new node is ordered right before `anchor` in
                         the schedule, or appended when -1 */
} tdm_node_spec;

/* What kind of op a node runs (since ABI 1.13): the catalog's flags, as
 * node_op_info reports them, so that a pass decides from what an op is
 * rather than from a list of names. Values are part of the ABI. */
enum {
  TDM_OP_ELEMENTWISE = 1u << 0,    /* y[i] depends on x[i] alone (a slice of x gives that slice of y) */
  TDM_OP_GRADIENT = 1u << 1,       /* a backward op of another op */
  TDM_OP_OPTIMIZER = 1u << 2,      /* updates parameters and optimizer state */
  TDM_OP_INFERENCE_ONLY = 1u << 3, /* no gradient by its nature (INT8, batch_norm_inference) */
  TDM_OP_VIEW = 1u << 4,           /* output 0 is input 0's bytes read with another shape */
  TDM_OP_UPDATES_STATE = 1u << 5,  /* overwrites a persistent input (running statistics, optimizer
                                      moments): running it twice in a step updates twice */
  TDM_OP_RANDOM = 1u << 6,         /* draws from its seed attributes (dropout) */
  TDM_OP_QUANTIZABLE = 1u << 7,    /* a product whose operands quantization-aware training fakes */
  TDM_OP_WIDE_PRODUCT = 1u << 8,   /* reads bf16/f16 operands (its first two inputs) into f32 outputs */
  TDM_OP_AMP_LOW = 1u << 9,        /* safe to compute in bf16 and in f16 under mixed precision */
  TDM_OP_AMP_BF16 = 1u << 10,      /* safe in bf16 only (f16's range is too small for it) */
  TDM_OP_HOST_RUN = 1u << 11,      /* the host runs it (a collective, a device copy), not a backend */
  TDM_OP_COLLECTIVE = 1u << 12     /* communicates between ranks */
};

/* What the host knows about a node's op (since ABI 1.13). An op the host
 * does not know (a plugin's own) is TDM_NOT_FOUND. */
typedef struct tdm_op_info {
  uint32_t struct_size;
  uint32_t flags;       /* TDM_OP_* */
  uint64_t f32_inputs;  /* bit i: input i is f32 whatever the data's dtype (a saved
                           log-sum-exp, a learning rate); inputs past 63 are never fixed */
  uint64_t f32_outputs; /* the same for outputs */
} tdm_op_info;

typedef struct tdm_graph_api {
  uint32_t struct_size;

  /* Nodes in schedule order: index 0 .. node_count-1. */
  size_t (*node_count)(const tdm_graph* graph);
  tdm_status (*node_at)(const tdm_graph* graph, size_t index, tdm_node_info* out);
  tdm_status (*node_get)(const tdm_graph* graph, tdm_node_id id, tdm_node_info* out);
  /* The i-th input or output value of a node (TDM_NO_VALUE when absent). */
  tdm_status (*node_input)(const tdm_graph* graph, tdm_node_id id, size_t i, tdm_value_id* out);
  tdm_status (*node_output)(const tdm_graph* graph, tdm_node_id id, size_t i, tdm_value_id* out);
  /* The i-th attribute; TDM_NOT_FOUND past the end. */
  tdm_status (*node_attr_at)(const tdm_graph* graph, tdm_node_id id, size_t i, tdm_attr* out);

  size_t (*value_count)(const tdm_graph* graph);
  tdm_status (*value_at)(const tdm_graph* graph, size_t index, tdm_value_info* out);
  tdm_status (*value_get)(const tdm_graph* graph, tdm_value_id id, tdm_value_info* out);

  /* Rewriting. Each returns TDM_INVALID_ARGUMENT (with a message) for a
   * reference to an unknown node or value, a duplicate name, or a change
   * that would make the graph cyclic. */
  tdm_status (*node_insert)(tdm_graph* graph, const tdm_node_spec* spec, tdm_node_id* out_id);
  tdm_status (*node_remove)(tdm_graph* graph, tdm_node_id id);
  tdm_status (*node_set_input)(tdm_graph* graph, tdm_node_id id, size_t i, tdm_value_id value);
  tdm_status (*node_set_attr)(tdm_graph* graph, tdm_node_id id, const tdm_attr* attr);
  /* Every consumer of `from` reads `to` instead, except the node `except`
   * (pass -1 for none) — the usual step when inserting a cast after `from`. */
  tdm_status (*value_replace_uses)(tdm_graph* graph, tdm_value_id from, tdm_value_id to, tdm_node_id except);
  /* Adds a persistent state value (e.g. a loss scale) with a fill value. */
  tdm_status (*state_add)(tdm_graph* graph, const char* name, const tdm_tensor_desc* desc,
                          double initial_value, tdm_value_id* out_id);

  /* Free-form annotations the executor and other passes read, e.g.
   * "recompute_segment" = "3". Keys are namespaced by convention
   * ("checkpointing.segment"); value NULL removes the key. The host itself
   * reads:
   *   "tandem.inplace" = "out:in[,out:in]"  output `out` overwrites input `in`
   *       (only where sdk/ops.md allows in-place for the op);
   *   "tandem.run_on_skip" = "1"  an optimizer-phase node that runs even when
   *       a feature skips the optimizer step (e.g. clearing accumulators). */
  tdm_status (*node_annotate)(tdm_graph* graph, tdm_node_id id, const char* key, const char* value);
  /* NULL when the node has no such annotation. */
  const char* (*node_annotation)(const tdm_graph* graph, tdm_node_id id, const char* key);

  /* ---- since ABI 1.12 (check struct_size, then the pointer) ---- */
  /* Adds a persistent state value with the dtype and shape of `source` (a
   * parameter or a state value) that starts as a copy of it: of its
   * initial values, or of the weights --init-from loaded. Resuming from a
   * checkpoint that holds the state restores it instead; one that lacks it
   * (the feature was enabled later) copies the source again. An exponential
   * moving average of the weights starts this way. */
  tdm_status (*state_add_copy)(tdm_graph* graph, const char* name, tdm_value_id source, tdm_value_id* out_id);

  /* ---- since ABI 1.13 ---- */
  /* The catalog's flags and fixed-f32 slots of node `id`'s op (sdk/ops.md,
   * "Catalog"). */
  tdm_status (*node_op_info)(const tdm_graph* graph, tdm_node_id id, tdm_op_info* out);
} tdm_graph_api;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TANDEM_GRAPH_H */
