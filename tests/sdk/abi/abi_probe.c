/* ABI probe: a tiny shared library whose exported functions mention every
 * struct, table and handle type of the SDK, so `abidw` records their full
 * layout (field names, types, offsets, sizes) from the debug info. The
 * functions do nothing; only their signatures matter. Compared against the
 * committed baseline sdk/abi/tandem-abi-<major>.<minor>.xml by the sdk.abi
 * test. When a new struct or table joins the SDK, add it here (and
 * regenerate the baseline with scripts/update-abi-baseline.sh). */
#include "tandem/tandem.h"

#define PROBE(NAME, TYPE)                         \
  TDM_EXPORT void tdm_abi_probe_##NAME(TYPE* p) { \
    (void)p;                                      \
  }

/* types.h */
PROBE(tensor_desc, tdm_tensor_desc)
PROBE(attr, tdm_attr)
PROBE(op_desc, tdm_op_desc)
PROBE(config_entry, tdm_config_entry)
PROBE(config, tdm_config)
/* backend.h */
PROBE(device_info, tdm_device_info)
PROBE(memory_stats, tdm_memory_stats)
PROBE(backend_api, tdm_backend_api)
PROBE(device, tdm_device)
PROBE(stream, tdm_stream)
PROBE(event, tdm_event)
PROBE(kernel, tdm_kernel)
/* graph.h */
PROBE(node_info, tdm_node_info)
PROBE(value_info, tdm_value_info)
PROBE(node_spec, tdm_node_spec)
PROBE(graph_api, tdm_graph_api)
PROBE(graph, tdm_graph)
/* host_api.h */
PROBE(host_api, tdm_host_api)
PROBE(run, tdm_run)
PROBE(saved_tensor, tdm_saved_tensor)
/* feature.h */
PROBE(step_info, tdm_step_info)
PROBE(feature_api, tdm_feature_api)
PROBE(feature, tdm_feature)
/* comm.h */
PROBE(comm_init_info, tdm_comm_init_info)
PROBE(comm_api, tdm_comm_api)
PROBE(comm, tdm_comm)
/* plugin.h */
PROBE(vendor_version, tdm_vendor_version)
PROBE(plugin, tdm_plugin)
TDM_EXPORT void tdm_abi_probe_plugin_entry_fn(tdm_plugin_entry_fn f) {
  (void)f;
}

/* The scalar typedefs (status, dtype, kinds, ...) fix the width of the enum
 * values; their names and widths are checked through these. */
TDM_EXPORT void tdm_abi_probe_scalars(tdm_status s, tdm_dtype d, tdm_log_level l, tdm_attr_type a,
                                      tdm_device_kind k, tdm_phase ph, tdm_value_kind vk, tdm_node_id n,
                                      tdm_value_id v, tdm_pass_stage st, tdm_reduce_op r,
                                      tdm_plugin_kind pk) {
  (void)s;
  (void)d;
  (void)l;
  (void)a;
  (void)k;
  (void)ph;
  (void)vk;
  (void)n;
  (void)v;
  (void)st;
  (void)r;
  (void)pk;
}
