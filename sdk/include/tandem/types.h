/* Tandem SDK — plain C types shared by every plugin kind.
 *
 * Depends only on the C standard headers and compiles as C99.
 * Every struct that crosses the plugin boundary begins with
 * `uint32_t struct_size` (sdk/ABI.md rule 4): the writer sets it to the size
 * it knows, a reader accepts any size >= the minimum it knows and reads only
 * the fields that fit (see TDM_STRUCT_HAS).
 */
#ifndef TANDEM_TYPES_H
#define TANDEM_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Symbol visibility for the one exported entry point (sdk/ABI.md rule 6). */
#if defined(_WIN32)
#define TDM_EXPORT __declspec(dllexport)
#else
#define TDM_EXPORT __attribute__((visibility("default")))
#endif

/* Size of a struct up to and including FIELD: the value struct_size takes
 * for the ABI minor that introduced FIELD as the struct's last field. */
#define TDM_STRUCT_SIZE(TYPE, FIELD) (offsetof(TYPE, FIELD) + sizeof(((TYPE*)0)->FIELD))

/* True when the struct at PTR, whose writer set struct_size, contains FIELD. */
#define TDM_STRUCT_HAS(PTR, TYPE, FIELD) ((PTR)->struct_size >= TDM_STRUCT_SIZE(TYPE, FIELD))

/* ---------------------------------------------------------------------------
 * Status codes. Errors are values (sdk/ABI.md rules 18-20): every fallible
 * function returns a tdm_status; the human-readable message travels
 * separately through tdm_host_api.set_error. Fixed-width so the ABI never
 * depends on enum size.
 * ------------------------------------------------------------------------- */
typedef int32_t tdm_status;
enum {
  TDM_OK = 0,
  /* A normal answer, not a failure: "this plugin does not implement that op,
   * dtype, layout or attribute combination". Automatic placement puts the
   * layer on another device; where the device is fixed, the run stops naming
   * the node (sdk/ABI.md rule 28). */
  TDM_UNSUPPORTED = 1,
  TDM_INVALID_ARGUMENT = 2,
  TDM_OUT_OF_MEMORY = 3,
  TDM_NOT_FOUND = 4,
  /* The device, driver or vendor library is not present on this machine. */
  TDM_UNAVAILABLE = 5,
  TDM_VERSION_MISMATCH = 6,
  TDM_TIMEOUT = 7,
  TDM_ABORTED = 8,
  TDM_INTERNAL = 9
};

/* ---------------------------------------------------------------------------
 * Element types. Values are part of the ABI: never renumber.
 * ------------------------------------------------------------------------- */
typedef int32_t tdm_dtype;
enum {
  TDM_DTYPE_INVALID = 0,
  TDM_F32 = 1,
  TDM_F64 = 2,
  TDM_F16 = 3,  /* IEEE 754 binary16 */
  TDM_BF16 = 4, /* bfloat16: the upper 16 bits of an f32 */
  TDM_S8 = 5,
  TDM_U8 = 6,
  TDM_S32 = 7,
  TDM_S64 = 8
};

/* Log levels for tdm_host_api.log. */
typedef int32_t tdm_log_level;
enum { TDM_LOG_ERROR = 0, TDM_LOG_WARNING = 1, TDM_LOG_INFO = 2, TDM_LOG_DEBUG = 3 };

/* ---------------------------------------------------------------------------
 * Tensor description: shape and type, no data.
 * ------------------------------------------------------------------------- */
typedef struct tdm_tensor_desc {
  uint32_t struct_size;
  tdm_dtype dtype;
  uint32_t rank;          /* 0 = scalar (one element) */
  const int64_t* dims;    /* rank entries; NULL when rank == 0 */
  const int64_t* strides; /* in elements; NULL = dense row-major. v1 ops only
                             receive dense tensors, so this is NULL. */
} tdm_tensor_desc;

/* ---------------------------------------------------------------------------
 * Typed attributes: name/value pairs of an op (e.g. stride, epsilon).
 * Exactly one value member is meaningful, chosen by `type`.
 * ------------------------------------------------------------------------- */
typedef int32_t tdm_attr_type;
enum {
  TDM_ATTR_INT = 1,    /* value.i */
  TDM_ATTR_FLOAT = 2,  /* value.f */
  TDM_ATTR_STRING = 3, /* value.s, NUL-terminated */
  TDM_ATTR_INTS = 4,   /* value.ints, count entries */
  TDM_ATTR_FLOATS = 5  /* value.floats, count entries */
};

typedef struct tdm_attr {
  uint32_t struct_size;
  const char* name;
  tdm_attr_type type;
  int64_t i;
  double f;
  const char* s;
  const int64_t* ints;
  const double* floats;
  size_t count;
} tdm_attr;

/* ---------------------------------------------------------------------------
 * Op description handed to kernel_prepare. Every pointer inside is owned by
 * the caller and valid only for the duration of the call: a plugin that needs
 * anything later copies it.
 * ------------------------------------------------------------------------- */
typedef struct tdm_op_desc {
  uint32_t struct_size;
  const char* op;      /* catalog name, e.g. "linear", "conv2d_grad_weight" */
  uint32_t op_version; /* catalog version of that op's semantics (sdk/ops.md) */
  const tdm_attr* attrs;
  size_t n_attrs;
  const tdm_tensor_desc* inputs;
  size_t n_inputs;
  const tdm_tensor_desc* outputs;
  size_t n_outputs;
  /* since ABI 1.1: the graph node's name (e.g. "fc1.backward"), for error
   * messages only; may be NULL. */
  const char* node_name;
  /* since ABI 1.3: the layout of each tensor, inputs then outputs
   * (n_inputs + n_outputs entries of TDM_LAYOUT_*); NULL = all plain. Only a
   * backend with kernel_layouts (backend.h) ever sees TDM_LAYOUT_NATIVE, and
   * only where it said it accepts (input) or offers (output) it. */
  const uint8_t* layouts;
} tdm_op_desc;

/* Tensor layouts (since ABI 1.3). PLAIN: dense row-major, as `strides` NULL
 * says. NATIVE: the backend's own layout of a tensor, a pure function of the
 * tensor's (dtype, dims) on that backend, so the kernel that writes a value
 * and every kernel that reads it agree without negotiating a format (oneDNN:
 * nChw16c). The host never reads or writes native bytes itself. */
enum { TDM_LAYOUT_PLAIN = 0, TDM_LAYOUT_NATIVE = 1 };

/* Key/value configuration, flattened to strings ("segments" = "4"): for a
 * feature's create, its `[features.NAME]` table of the model file; for a
 * backend's or comm plugin's init, the host's "plugins.NAME." keys with the
 * prefix removed, which the user sets with `--plugin-option NAME.KEY=VALUE`
 * (empty without; sdk/ABI.md rules 38-40). Owned by the host; valid for the
 * duration of the call that receives it. */
typedef struct tdm_config_entry {
  uint32_t struct_size;
  const char* key;
  const char* value;
} tdm_config_entry;

typedef struct tdm_config {
  uint32_t struct_size;
  const tdm_config_entry* entries;
  size_t n_entries;
} tdm_config;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TANDEM_TYPES_H */
