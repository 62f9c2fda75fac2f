/* Tandem SDK — backend plugins: devices, memory, streams, copies, kernels.
 *
 * A backend exposes one or more devices. All memory a backend hands out is
 * freed through the same backend (sdk/ABI.md rule 16). Unless stated
 * otherwise a function may be called from any thread, but a stream is used
 * by one thread at a time, and a device handle is used from any thread
 * concurrently (rule 17). Which functions are required: rules 21-23.
 *
 * Streams order work: operations enqueued on one stream run in order; work on
 * different streams of a device may overlap; events order work across
 * streams. A backend with no asynchrony (plain CPU) may run everything
 * immediately at enqueue time: that satisfies every ordering rule.
 */
#ifndef TANDEM_BACKEND_H
#define TANDEM_BACKEND_H

#include "tandem/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_device tdm_device; /* opaque, plugin-owned */
typedef struct tdm_stream tdm_stream; /* opaque, plugin-owned */
typedef struct tdm_event tdm_event;   /* opaque, plugin-owned */
typedef struct tdm_kernel tdm_kernel; /* opaque, plugin-owned */

typedef int32_t tdm_device_kind;
enum { TDM_DEVICE_CPU = 0, TDM_DEVICE_GPU = 1 };

typedef struct tdm_device_info {
  uint32_t struct_size; /* set by the caller: the size it can receive */
  const char* name;     /* e.g. "NVIDIA H100 80GB HBM3"; owned by the device */
  tdm_device_kind kind;
  uint64_t total_memory; /* bytes */
  uint64_t free_memory;  /* bytes, at the time of the call */
  /* 1 when host_alloc_pinned gives memory the device copies from faster. */
  int32_t has_pinned_host_memory;
  /* 1 when device memory is ordinary host memory (a CPU backend): the host
   * may then read and write device pointers directly. */
  int32_t host_addressable;
  /* ---- since ABI 1.4 ---- */
  /* What the device's kernels can use, as lower-case words separated by
   * single spaces: for a CPU the instruction sets its kernels may run
   * (e.g. "avx2 fma", "avx512_core vnni bf16 amx"), for a GPU its
   * architecture ("sm_90"). What the backend will actually use, so a limit
   * such as oneDNN's ONEDNN_MAX_CPU_ISA shows here. Owned by the device,
   * valid until it is closed; NULL when the backend does not say. The host
   * zeroes the struct before the call, so a backend of ABI < 1.4 leaves it
   * NULL. */
  const char* features;
} tdm_device_info;

/* Allocator statistics (since ABI 1.1). Byte counts. */
typedef struct tdm_memory_stats {
  uint32_t struct_size;
  uint64_t allocated;          /* bytes in live allocations */
  uint64_t reserved;           /* bytes obtained from the system, cache included */
  uint64_t peak_allocated;     /* high-water mark of `allocated` */
  uint64_t allocations;        /* number of successful allocation calls */
  uint64_t largest_free_block; /* for fragmentation: reserved - allocated
                                  spread over how many free blocks */
} tdm_memory_stats;

typedef struct tdm_backend_api {
  uint32_t struct_size;

  /* ---- devices ----
   * device_count: number of usable devices. When the driver or hardware is
   * absent the backend still loads: it returns TDM_UNAVAILABLE and says why
   * through set_error ("driver not found"); *count is then 0. */
  tdm_status (*device_count)(uint32_t* count);
  /* Opens device `index` (< count). The handle is valid until device_close;
   * opening the same index twice may return the same handle (refcounted). */
  tdm_status (*device_open)(uint32_t index, tdm_device** out);
  void (*device_close)(tdm_device* device);
  /* Fills the fields of *out that fit out->struct_size. */
  tdm_status (*device_info)(tdm_device* device, tdm_device_info* out);

  /* ---- memory ----
   * Device memory, at least 64-byte aligned. mem_alloc returns
   * TDM_OUT_OF_MEMORY (with the size in the message) when it cannot. */
  tdm_status (*mem_alloc)(tdm_device* device, size_t bytes, void** out);
  void (*mem_free)(tdm_device* device, void* pointer);
  /* Optional (NULL when the device has none): page-locked host memory for
   * staging copies. The host falls back to ordinary memory. */
  tdm_status (*host_alloc_pinned)(tdm_device* device, size_t bytes, void** out);
  void (*host_free_pinned)(tdm_device* device, void* pointer);

  /* ---- streams and events ----
   * All eight are required, and the loader checks them: the host orders
   * prefetching and cross-device copies with events (sdk/ABI.md rules
   * 21-22). */
  tdm_status (*stream_create)(tdm_device* device, tdm_stream** out);
  void (*stream_destroy)(tdm_stream* stream);
  /* Blocks until all work enqueued on the stream has finished; returns the
   * first asynchronous error raised by that work, if any. */
  tdm_status (*stream_synchronize)(tdm_stream* stream);
  tdm_status (*event_create)(tdm_device* device, tdm_event** out);
  void (*event_destroy)(tdm_event* event);
  /* Captures the work enqueued on `stream` so far. */
  tdm_status (*event_record)(tdm_event* event, tdm_stream* stream);
  /* Work enqueued on `stream` after this call waits for the event. */
  tdm_status (*stream_wait_event)(tdm_stream* stream, tdm_event* event);
  tdm_status (*event_synchronize)(tdm_event* event);

  /* ---- copies, asynchronous on `stream` ----
   * Host pointers must stay valid and unchanged until the stream reaches the
   * copy (pinned memory lets the device overlap it with compute). */
  tdm_status (*copy_h2d)(tdm_stream* stream, void* device_dst, const void* host_src, size_t bytes);
  tdm_status (*copy_d2h)(tdm_stream* stream, void* host_dst, const void* device_src, size_t bytes);
  tdm_status (*copy_d2d)(tdm_stream* stream, void* device_dst, const void* device_src, size_t bytes);

  /* ---- kernels ----
   * kernel_prepare resolves an op description once (op name, dtypes, shapes,
   * attributes) into a kernel ready to launch many times. TDM_UNSUPPORTED is
   * a normal answer (say why through set_error at TDM_LOG_DEBUG detail; the
   * host shows it in verbose mode). *workspace_bytes receives the scratch
   * device memory each launch needs (0 if none). The description is only
   * valid during the call. */
  tdm_status (*kernel_prepare)(tdm_device* device, const tdm_op_desc* op, tdm_kernel** out,
                               size_t* workspace_bytes);
  /* Enqueues one execution. inputs/outputs are device pointers in the order
   * of the op's catalog signature (NULL for an absent optional tensor);
   * outputs may alias inputs exactly where the catalog allows in-place.
   * The arrays themselves may be reused by the caller after return. */
  tdm_status (*kernel_launch)(tdm_kernel* kernel, tdm_stream* stream, void* const* inputs,
                              void* const* outputs, void* workspace);
  void (*kernel_release)(tdm_kernel* kernel);

  /* ---- since ABI 1.1 (check struct_size, then the pointer) ---- */
  /* Native handle of a stream (cudaStream_t for CUDA, NULL for a CPU
   * backend), for a comm plugin on the same device. Optional. */
  void* (*stream_native_handle)(tdm_stream* stream);
  /* Allocator statistics and release of cached blocks. Optional. */
  tdm_status (*memory_stats)(tdm_device* device, tdm_memory_stats* out);
  tdm_status (*memory_release_cached)(tdm_device* device);
  /* The implementation a kernel resolved to (e.g. "brgemm:avx512_core"), for
   * verbose logs and profiles. Owned by the kernel. Optional. */
  const char* (*kernel_describe)(tdm_kernel* kernel);

  /* ---- since ABI 1.3 (check struct_size, then the pointer) ---- */
  /* Native layouts (types.h, TDM_LAYOUT_NATIVE). Optional: NULL = the backend
   * has none and every tensor stays plain. The host calls it before
   * kernel_prepare with op->layouts NULL; the arrays have n_inputs and
   * n_outputs entries, zeroed by the host. The backend sets
   * input_accepts_native[i] = 1 where the kernel can read input i in its
   * native layout, output_offers_native[j] = 1 where it can write output j in
   * it, and output_native_bytes[j] to the bytes a native output j occupies
   * (padding included; >= the plain size). The host then chooses, per value,
   * native only when its producer offers it and every consumer accepts it,
   * and prepares each kernel with op->layouts saying what it chose: any mix
   * of native and plain within what the backend declared must work. A
   * TDM_UNSUPPORTED answer means "all plain". */
  tdm_status (*kernel_layouts)(tdm_device* device, const tdm_op_desc* op, uint8_t* input_accepts_native,
                               uint8_t* output_offers_native, uint64_t* output_native_bytes);

  /* ---- since ABI 1.6 (check struct_size, then the pointer) ---- */
  /* The device memory one mem_alloc of `bytes` takes (*out >= bytes): the
   * size class or page the backend's allocator rounds the request up to.
   * The host plans every allocation at this size, so a plan that fits the
   * device's free memory is one the allocator can serve (ABI.md rule 25).
   * Pure arithmetic: must not allocate, block or touch the device.
   * Optional: NULL = the request itself (the host adds its own 512-byte
   * granule either way). */
  tdm_status (*mem_footprint)(tdm_device* device, uint64_t bytes, uint64_t* out);

  /* ---- since ABI 1.7 (check struct_size, then the pointers) ---- */
  /* Whether this backend copies from device `from` straight into device
   * `to` (two of its own devices), turning on what that takes (CUDA: peer
   * access between the two GPUs). *out = 1: the host may call copy_peer for
   * the pair, and a stream of either device may wait for an event of the
   * other (ABI.md rule 26). *out = 0: the host copies through host memory.
   * Called when a run is set up, maybe more than once for a pair (asking
   * again must be harmless). Optional: NULL (or a failing call) = 0; used
   * only when copy_peer is set too. */
  tdm_status (*peer_access)(tdm_device* from, tdm_device* to, int32_t* out);
  /* Copies `bytes` from `src` in the memory of the stream's device to `dst`
   * in the memory of device `to`, enqueued on `stream` (asynchronous like
   * the other copies); only for a pair peer_access answered 1 for. */
  tdm_status (*copy_peer)(tdm_stream* stream, tdm_device* to, void* dst, const void* src, size_t bytes);
} tdm_backend_api;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TANDEM_BACKEND_H */
