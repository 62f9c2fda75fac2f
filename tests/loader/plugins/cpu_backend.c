/* A minimal CPU backend in plain C, for the loader tests.
 *
 * Built several times: against the current SDK and against the
 * frozen ABI 1.0 headers in tests/abi/sdk-1.0, under the name PLUGIN_NAME.
 * One device; two kernels: "fill" (attribute value, one f32 output) and
 * "copy" (one input, one output). Test switches come from configuration:
 *   plugins.<name>.refuse     = 1  entry returns NULL with a message
 *   plugins.<name>.fail_init  = 1  init fails with a message
 *   plugins.<name>.no_device  = 1  device_count answers TDM_UNAVAILABLE
 *   plugins.<name>.gpus       = N  N devices of kind GPU (still host memory),
 *                                  for the choice of a rank's GPU
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign: C99 has no aligned_alloc */
#include <stdlib.h>
#include <string.h>

#include "tandem/plugin.h"

#ifndef PLUGIN_NAME
#error "PLUGIN_NAME must be defined"
#endif
#if defined(EXPECT_ABI_MINOR) && TDM_ABI_MINOR != EXPECT_ABI_MINOR
#error "compiled against the wrong SDK headers"
#endif

struct tdm_device {
  size_t allocated;
  size_t allocations;
};
struct tdm_stream {
  int unused;
};
struct tdm_event {
  int unused;
};
struct tdm_kernel {
  int is_fill;
  size_t count;
  float value;
};

static const tdm_host_api* g_host;
static struct tdm_device g_device;
static int g_no_device;
static uint32_t g_gpus; /* 0: one CPU device */

static int config_flag(const tdm_config* config, const char* key) {
  size_t i;
  if (config == NULL) return 0;
  for (i = 0; i < config->n_entries; ++i)
    if (strcmp(config->entries[i].key, key) == 0 && strcmp(config->entries[i].value, "1") == 0) return 1;
  return 0;
}

static tdm_status plugin_init(const tdm_config* config) {
  size_t i;
  if (config_flag(config, "fail_init")) {
    g_host->set_error(g_host->ctx, TDM_INVALID_ARGUMENT, "init refused: fail_init is set in [plugins.%s]",
                      PLUGIN_NAME);
    return TDM_INVALID_ARGUMENT;
  }
  g_no_device = config_flag(config, "no_device");
  g_gpus = 0;
  for (i = 0; config != NULL && i < config->n_entries; ++i)
    if (strcmp(config->entries[i].key, "gpus") == 0)
      g_gpus = (uint32_t)strtoul(config->entries[i].value, NULL, 10);
  return TDM_OK;
}

static tdm_status device_count(uint32_t* count) {
  *count = 0;
  if (g_no_device) {
    g_host->set_error(g_host->ctx, TDM_UNAVAILABLE, "driver not found");
    return TDM_UNAVAILABLE;
  }
  *count = g_gpus > 0 ? g_gpus : 1;
  return TDM_OK;
}

static tdm_status device_open(uint32_t index, tdm_device** out) {
  if (index >= (g_gpus > 0 ? g_gpus : 1)) {
    g_host->set_error(g_host->ctx, TDM_INVALID_ARGUMENT, "device %u does not exist", index);
    return TDM_INVALID_ARGUMENT;
  }
  *out = &g_device;
  return TDM_OK;
}

static void device_close(tdm_device* device) {
  (void)device;
}

static tdm_status device_info(tdm_device* device, tdm_device_info* out) {
  tdm_device_info full;
  size_t size = out->struct_size < sizeof full ? out->struct_size : sizeof full;
  (void)device;
  memset(&full, 0, sizeof full);
  full.name = PLUGIN_NAME " test CPU";
  full.kind = g_gpus > 0 ? TDM_DEVICE_GPU : TDM_DEVICE_CPU;
  full.total_memory = (uint64_t)1 << 30;
  full.free_memory = (uint64_t)1 << 29;
  full.host_addressable = 1;
  if (size > sizeof(uint32_t))
    memcpy((char*)out + sizeof(uint32_t), (char*)&full + sizeof(uint32_t), size - sizeof(uint32_t));
  return TDM_OK;
}

static tdm_status mem_alloc(tdm_device* device, size_t bytes, void** out) {
  size_t rounded = (bytes + 63) / 64 * 64;
  *out = NULL;
  if (posix_memalign(out, 64, rounded == 0 ? 64 : rounded) != 0 || *out == NULL) {
    g_host->set_error(g_host->ctx, TDM_OUT_OF_MEMORY, "cannot allocate %zu bytes", bytes);
    return TDM_OUT_OF_MEMORY;
  }
  device->allocated += bytes;
  device->allocations += 1;
  return TDM_OK;
}

static void mem_free(tdm_device* device, void* pointer) {
  (void)device;
  free(pointer);
}

static tdm_status stream_create(tdm_device* device, tdm_stream** out) {
  (void)device;
  *out = (tdm_stream*)calloc(1, sizeof(tdm_stream));
  return *out != NULL ? TDM_OK : TDM_OUT_OF_MEMORY;
}
static void stream_destroy(tdm_stream* stream) {
  free(stream);
}
static tdm_status stream_synchronize(tdm_stream* stream) {
  (void)stream;
  return TDM_OK;
}
static tdm_status event_create(tdm_device* device, tdm_event** out) {
  (void)device;
  *out = (tdm_event*)calloc(1, sizeof(tdm_event));
  return *out != NULL ? TDM_OK : TDM_OUT_OF_MEMORY;
}
static void event_destroy(tdm_event* event) {
  free(event);
}
static tdm_status event_record(tdm_event* event, tdm_stream* stream) {
  (void)event;
  (void)stream;
  return TDM_OK;
}
static tdm_status stream_wait_event(tdm_stream* stream, tdm_event* event) {
  (void)event;
  (void)stream;
  return TDM_OK;
}
static tdm_status event_synchronize(tdm_event* event) {
  (void)event;
  return TDM_OK;
}
static tdm_status copy_any(tdm_stream* stream, void* dst, const void* src, size_t bytes) {
  (void)stream;
  if (bytes != 0) memmove(dst, src, bytes);
  return TDM_OK;
}

static size_t numel(const tdm_tensor_desc* d) {
  size_t n = 1;
  uint32_t i;
  for (i = 0; i < d->rank; ++i) n *= (size_t)d->dims[i];
  return n;
}

static tdm_status kernel_prepare(tdm_device* device, const tdm_op_desc* op, tdm_kernel** out,
                                 size_t* workspace) {
  struct tdm_kernel k;
  size_t i;
  (void)device;
  memset(&k, 0, sizeof k);
  *workspace = 0;
  if (strcmp(op->op, "fill") == 0 && op->n_outputs == 1 && op->outputs[0].dtype == TDM_F32) {
    k.is_fill = 1;
    k.count = numel(&op->outputs[0]);
    for (i = 0; i < op->n_attrs; ++i)
      if (strcmp(op->attrs[i].name, "value") == 0) k.value = (float)op->attrs[i].f;
  } else if (strcmp(op->op, "copy") == 0 && op->n_inputs == 1 && op->n_outputs == 1) {
    k.count = numel(&op->inputs[0]) * 4;
  } else {
    g_host->set_error(g_host->ctx, TDM_UNSUPPORTED, "op '%s' is not implemented", op->op);
    return TDM_UNSUPPORTED;
  }
  *out = (tdm_kernel*)malloc(sizeof k);
  if (*out == NULL) return TDM_OUT_OF_MEMORY;
  memcpy(*out, &k, sizeof k);
  return TDM_OK;
}

static tdm_status kernel_launch(tdm_kernel* k, tdm_stream* stream, void* const* inputs, void* const* outputs,
                                void* workspace) {
  size_t i;
  (void)stream;
  (void)workspace;
  if (k->is_fill) {
    for (i = 0; i < k->count; ++i) ((float*)outputs[0])[i] = k->value;
  } else {
    memmove(outputs[0], inputs[0], k->count);
  }
  return TDM_OK;
}

static void kernel_release(tdm_kernel* k) {
  free(k);
}

#if TDM_ABI_MINOR >= 1
static tdm_status memory_stats(tdm_device* device, tdm_memory_stats* out) {
  tdm_memory_stats full;
  size_t size = out->struct_size < sizeof full ? out->struct_size : sizeof full;
  memset(&full, 0, sizeof full);
  full.allocated = device->allocated;
  full.allocations = device->allocations;
  if (size > sizeof(uint32_t))
    memcpy((char*)out + sizeof(uint32_t), (char*)&full + sizeof(uint32_t), size - sizeof(uint32_t));
  return TDM_OK;
}
#endif

#if TDM_ABI_MINOR >= 6
/* Pages of 64 KiB, to see the host plan with them. */
static tdm_status mem_footprint(tdm_device* device, uint64_t bytes, uint64_t* out) {
  (void)device;
  *out = (bytes + 65535) / 65536 * 65536;
  return TDM_OK;
}
#endif

static tdm_backend_api g_api;
static tdm_plugin g_plugin;

TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major, uint32_t minor) {
  char buffer[8];
  size_t size = sizeof buffer;
  (void)minor;
  g_host = host;
  if (major != TDM_ABI_MAJOR) {
    host->set_error(host->ctx, TDM_VERSION_MISMATCH, "built for ABI %d, host speaks %u", TDM_ABI_MAJOR,
                    major);
    return NULL;
  }
  if (host->config_get(host->ctx, "plugins." PLUGIN_NAME ".refuse", buffer, &size) == TDM_OK) {
    host->set_error(host->ctx, TDM_UNAVAILABLE, "refusing to load because plugins.%s.refuse is set",
                    PLUGIN_NAME);
    return NULL;
  }

  memset(&g_api, 0, sizeof g_api);
  g_api.struct_size = sizeof g_api;
  g_api.device_count = device_count;
  g_api.device_open = device_open;
  g_api.device_close = device_close;
  g_api.device_info = device_info;
  g_api.mem_alloc = mem_alloc;
  g_api.mem_free = mem_free;
  g_api.stream_create = stream_create;
  g_api.stream_destroy = stream_destroy;
  g_api.stream_synchronize = stream_synchronize;
  g_api.event_create = event_create;
  g_api.event_destroy = event_destroy;
  g_api.event_record = event_record;
  g_api.stream_wait_event = stream_wait_event;
  g_api.event_synchronize = event_synchronize;
  g_api.copy_h2d = copy_any;
  g_api.copy_d2h = copy_any;
  g_api.copy_d2d = copy_any;
  g_api.kernel_prepare = kernel_prepare;
  g_api.kernel_launch = kernel_launch;
  g_api.kernel_release = kernel_release;
#if TDM_ABI_MINOR >= 1
  g_api.memory_stats = memory_stats;
#endif
#if TDM_ABI_MINOR >= 6
  g_api.mem_footprint = mem_footprint;
#endif

  memset(&g_plugin, 0, sizeof g_plugin);
  g_plugin.struct_size = sizeof g_plugin;
  g_plugin.abi_major = TDM_ABI_MAJOR;
  g_plugin.abi_minor = TDM_ABI_MINOR;
  g_plugin.name = PLUGIN_NAME;
  g_plugin.kind = TDM_PLUGIN_BACKEND;
  g_plugin.version = "0.0.1";
  g_plugin.sdk_version = TDM_SDK_VERSION;
  g_plugin.description = "loader test backend";
  g_plugin.init = plugin_init;
  g_plugin.backend = &g_api;
  host->log(host->ctx, TDM_LOG_INFO, "entry called");
  return &g_plugin;
}
