// oneDNN backend — the plugin entry point (the one exported symbol).
#include <string>

#include "device.hpp"

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  try {
    const dnnl_version_t* v = dnnl_version();
    const std::string version =
        std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    return tandem::backend_entry<tandem::onednn::OnednnBackend>(
        host, major, minor,
        {"onednn",
         "1.0.0",
         "CPU backend: oneDNN primitives for dense algebra, convolution, pooling, activations, softmax and "
         "binary ops; vectorised OpenMP C++ for the rest",
         {{"oneDNN", version}}});
  } catch (...) {  // the descriptor's strings allocate; nothing may escape a C entry point
    return nullptr;
  }
}
