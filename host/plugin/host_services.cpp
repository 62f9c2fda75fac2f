#include "plugin/host_services.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "graph/graph_api.hpp"
#include "plugin/call_window.hpp"
#include "plugin/run_access.hpp"
#include "tandem/version.h"
#include "util/last_error.hpp"
#include "util/logger.hpp"

namespace tandem::host {
namespace {

// Contexts live until the process exits: plugins keep the table pointer and
// may log from their own threads during static destruction. The holder is
// deliberately leaked so no destructor runs while a plugin can still call.
struct ContextKeeper {
  std::mutex mutex;
  std::deque<std::unique_ptr<PluginContext>> contexts;
};
ContextKeeper& keeper() {
  static ContextKeeper* k = new ContextKeeper;  // intentionally never freed
  return *k;
}

PluginContext* as_context(void* ctx) {
  return static_cast<PluginContext*>(ctx);
}

void api_log_impl(void* ctx, tdm_log_level level, const char* message) {
  PluginContext* c = as_context(ctx);
  Logger::global().write(log_level_from_c(level), c != nullptr ? c->name : "plugin",
                         message != nullptr ? message : "");
}

void api_set_error_impl(void* ctx, tdm_status code, const char* format, va_list args) {
  PluginContext* c = as_context(ctx);
  std::string text;
  if (format != nullptr) {
    va_list copy;
    va_copy(copy, args);
    int n = std::vsnprintf(nullptr, 0, format, copy);
    va_end(copy);
    if (n > 0) {
      text.resize(static_cast<size_t>(n) + 1);
      std::vsnprintf(text.data(), text.size(), format, args);
      text.resize(static_cast<size_t>(n));
    }
  }
  std::string source = c != nullptr ? c->name : "plugin";
  Logger::global().write(LogLevel::debug, source, "set_error(" + std::to_string(code) + "): " + text);
  record_last_error(code, std::move(source), std::move(text));
}

tdm_status api_config_get_impl(void* ctx, const char* key, char* buffer, size_t* size) {
  PluginContext* c = as_context(ctx);
  if (c == nullptr || key == nullptr || size == nullptr) return TDM_INVALID_ARGUMENT;
  std::optional<std::string> value = c->config->get(key);
  if (!value) return TDM_NOT_FOUND;
  const size_t capacity = *size;
  *size = value->size() + 1;  // the length the value needs, NUL included
  if (buffer == nullptr || capacity < value->size() + 1) return TDM_INVALID_ARGUMENT;
  std::memcpy(buffer, value->c_str(), value->size() + 1);
  return TDM_OK;
}

void* api_scratch_alloc(void*, size_t bytes, size_t alignment) {
  if (alignment < 64) alignment = 64;
  if ((alignment & (alignment - 1)) != 0) return nullptr;  // not a power of two
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (rounded == 0) rounded = alignment;
  if (rounded < bytes) return nullptr;  // overflow
  return std::aligned_alloc(alignment, rounded);
}

void api_scratch_free(void*, void* pointer) {
  std::free(pointer);
}

tdm_status api_run_scalar_get_impl(void* ctx, tdm_run* run, const char* name, double* out) {
  PluginContext* c = as_context(ctx);
  if (run == nullptr || name == nullptr || out == nullptr) return TDM_INVALID_ARGUMENT;
  if (std::string why = CallWindow::refusal(CallWindow::kStepHook, run, "run_scalar_get"); !why.empty()) {
    record_last_error(TDM_INVALID_ARGUMENT, c != nullptr ? c->name : "", std::move(why));
    return TDM_INVALID_ARGUMENT;
  }
  Result<double> value = RunAccess::from_c(run)->get(name);
  if (!value) {
    record_last_error(value.error().status, c != nullptr ? c->name : "", value.error().message);
    return value.error().status;
  }
  *out = *value;
  return TDM_OK;
}

tdm_status api_run_scalar_set_impl(void* ctx, tdm_run* run, const char* name, double value) {
  PluginContext* c = as_context(ctx);
  if (run == nullptr || name == nullptr) return TDM_INVALID_ARGUMENT;
  if (std::string why = CallWindow::refusal(CallWindow::kStepHook, run, "run_scalar_set"); !why.empty()) {
    record_last_error(TDM_INVALID_ARGUMENT, c != nullptr ? c->name : "", std::move(why));
    return TDM_INVALID_ARGUMENT;
  }
  Result<void> done = RunAccess::from_c(run)->set(name, value);
  if (!done) {
    record_last_error(done.error().status, c != nullptr ? c->name : "", done.error().message);
    return done.error().status;
  }
  return TDM_OK;
}

tdm_status api_run_ranks_max_impl(void* ctx, tdm_run* run, int32_t* value) {
  PluginContext* c = as_context(ctx);
  if (run == nullptr || value == nullptr) return TDM_INVALID_ARGUMENT;
  if (std::string why = CallWindow::refusal(CallWindow::kStepHook, run, "run_ranks_max"); !why.empty()) {
    record_last_error(TDM_INVALID_ARGUMENT, c != nullptr ? c->name : "", std::move(why));
    return TDM_INVALID_ARGUMENT;
  }
  Result<int32_t> max = RunAccess::from_c(run)->max_over_ranks(*value);
  if (!max) {
    record_last_error(max.error().status, c != nullptr ? c->name : "", max.error().message);
    return max.error().status;
  }
  *value = *max;
  return TDM_OK;
}

// The whole-tensor functions (ABI 1.12): refused outside a step boundary;
// a failure is recorded as the host's, so the plugin's own message about it
// keeps the reason (util/last_error.hpp).
template <class Body>
tdm_status at_step_boundary(tdm_run* run, const char* function, Body&& body) {
  if (run == nullptr) {
    record_last_error(TDM_INVALID_ARGUMENT, kHostSource, std::string(function) + ": run is NULL");
    return TDM_INVALID_ARGUMENT;
  }
  if (std::string why = CallWindow::refusal(CallWindow::kStepBoundary, run, function); !why.empty()) {
    record_last_error(TDM_INVALID_ARGUMENT, kHostSource, std::move(why));
    return TDM_INVALID_ARGUMENT;
  }
  Result<void> done = body(*RunAccess::from_c(run));
  if (!done) {
    record_last_error(done.error().status, kHostSource, std::string(function) + ": " + done.error().message);
    return done.error().status;
  }
  return TDM_OK;
}

tdm_status api_run_tensor_desc_impl(tdm_run* run, const char* name, tdm_tensor_desc* out) {
  return at_step_boundary(run, "run_tensor_desc", [&](RunAccess& access) -> Result<void> {
    if (name == nullptr || out == nullptr)
      return make_error("value name or desc is NULL", TDM_INVALID_ARGUMENT);
    auto type = access.tensor_type(name);
    if (!type) return type.error();
    const std::vector<int64_t>& dims = access.keep_dims(name, type->dims);
    out->dtype = type->dtype;
    out->rank = static_cast<uint32_t>(dims.size());
    out->dims = dims.empty() ? nullptr : dims.data();
    out->strides = nullptr;
    return {};
  });
}

tdm_status api_run_tensor_read_impl(tdm_run* run, const char* name, void* buffer, size_t bytes) {
  return at_step_boundary(run, "run_tensor_read", [&](RunAccess& access) -> Result<void> {
    if (name == nullptr || buffer == nullptr)
      return make_error("value name or buffer is NULL", TDM_INVALID_ARGUMENT);
    return access.read_tensor(name, buffer, bytes);
  });
}

tdm_status api_run_tensor_write_impl(tdm_run* run, const char* name, const void* buffer, size_t bytes) {
  return at_step_boundary(run, "run_tensor_write", [&](RunAccess& access) -> Result<void> {
    if (name == nullptr || buffer == nullptr)
      return make_error("value name or buffer is NULL", TDM_INVALID_ARGUMENT);
    return access.write_tensor(name, buffer, bytes);
  });
}

tdm_status api_run_save_tensors_impl(void* ctx, tdm_run* run, const char* file,
                                     const tdm_saved_tensor* tensors, size_t count) {
  return at_step_boundary(run, "run_save_tensors", [&](RunAccess& access) -> Result<void> {
    if (file == nullptr || (tensors == nullptr && count > 0))
      return make_error("file name or tensor list is NULL", TDM_INVALID_ARGUMENT);
    std::vector<RunAccess::SavedTensor> list;
    for (size_t i = 0; i < count; ++i) {
      const tdm_saved_tensor& t = tensors[i];
      if (t.struct_size < TDM_STRUCT_SIZE(tdm_saved_tensor, value_name) || t.name == nullptr ||
          t.value_name == nullptr)
        return make_error(std::string(file) + ": tensor " + std::to_string(i) +
                              " of the list has no name or value name (or a struct_size too small)",
                          TDM_INVALID_ARGUMENT);
      list.push_back({t.name, t.value_name});
    }
    PluginContext* c = as_context(ctx);
    auto written = access.save_tensors(file, list, c != nullptr ? c->name : "plugin");
    if (!written) return written.error();
    if (!written->empty()) log_info("wrote " + *written + " (" + std::to_string(count) + " tensors)");
    return {};
  });
}

// The C entry points: nothing may propagate into plugin code (sdk/ABI.md rule 14).
void api_log(void* ctx, tdm_log_level level, const char* message) {
  try {
    api_log_impl(ctx, level, message);
  } catch (...) {
  }
}

void api_set_error(void* ctx, tdm_status code, const char* format, ...) {
  try {
    va_list args;
    va_start(args, format);
    api_set_error_impl(ctx, code, format, args);
    va_end(args);
  } catch (...) {
  }
}

tdm_status api_config_get(void* ctx, const char* key, char* buffer, size_t* size) {
  try {
    return api_config_get_impl(ctx, key, buffer, size);
  } catch (...) {
    return TDM_INTERNAL;
  }
}

tdm_status api_run_scalar_get(void* ctx, tdm_run* run, const char* name, double* out) {
  try {
    return api_run_scalar_get_impl(ctx, run, name, out);
  } catch (...) {
    return TDM_INTERNAL;
  }
}

tdm_status api_run_scalar_set(void* ctx, tdm_run* run, const char* name, double value) {
  try {
    return api_run_scalar_set_impl(ctx, run, name, value);
  } catch (...) {
    return TDM_INTERNAL;
  }
}

tdm_status api_run_ranks_max(void* ctx, tdm_run* run, int32_t* value) {
  try {
    return api_run_ranks_max_impl(ctx, run, value);
  } catch (...) {
    return TDM_INTERNAL;
  }
}

tdm_status api_run_tensor_desc(void*, tdm_run* run, const char* name, tdm_tensor_desc* out) {
  try {
    return api_run_tensor_desc_impl(run, name, out);
  } catch (...) {
    return TDM_INTERNAL;
  }
}

tdm_status api_run_tensor_read(void*, tdm_run* run, const char* name, void* buffer, size_t bytes) {
  try {
    return api_run_tensor_read_impl(run, name, buffer, bytes);
  } catch (...) {
    return TDM_INTERNAL;
  }
}

tdm_status api_run_tensor_write(void*, tdm_run* run, const char* name, const void* buffer, size_t bytes) {
  try {
    return api_run_tensor_write_impl(run, name, buffer, bytes);
  } catch (...) {
    return TDM_INTERNAL;
  }
}

tdm_status api_run_save_tensors(void* ctx, tdm_run* run, const char* file, const tdm_saved_tensor* tensors,
                                size_t count) {
  try {
    return api_run_save_tensors_impl(ctx, run, file, tensors, count);
  } catch (...) {
    return TDM_INTERNAL;
  }
}

}  // namespace

HostServices::HostServices(std::shared_ptr<ConfigStore> config) : config_(std::move(config)) {
  if (!config_) config_ = std::make_shared<ConfigStore>();
}

PluginContext& HostServices::create_context(const std::string& name, const std::string& path) {
  auto context = std::make_unique<PluginContext>();
  context->name = name;
  context->path = path;
  context->config = config_;
  tdm_host_api& api = context->api;
  api.struct_size = sizeof(tdm_host_api);
  api.abi_major = TDM_ABI_MAJOR;
  api.abi_minor = TDM_ABI_MINOR;
  api.ctx = context.get();
  api.log = api_log;
  api.set_error = api_set_error;
  api.config_get = api_config_get;
  api.scratch_alloc = api_scratch_alloc;
  api.scratch_free = api_scratch_free;
  api.graph = graph_api_table();
  api.run_scalar_get = api_run_scalar_get;
  api.run_scalar_set = api_run_scalar_set;
  api.run_ranks_max = api_run_ranks_max;
  api.run_tensor_desc = api_run_tensor_desc;
  api.run_tensor_read = api_run_tensor_read;
  api.run_tensor_write = api_run_tensor_write;
  api.run_save_tensors = api_run_save_tensors;

  ContextKeeper& k = keeper();
  std::lock_guard lock(k.mutex);
  k.contexts.push_back(std::move(context));
  return *k.contexts.back();
}

}  // namespace tandem::host
