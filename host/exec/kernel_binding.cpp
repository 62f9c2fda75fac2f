#include "exec/kernel_binding.hpp"

#include <utility>

#include "exec/tensor_text.hpp"
#include "plugin/optional_call.hpp"
#include "plugin/plugin_call.hpp"
#include "util/last_error.hpp"

namespace tandem::host::exec {
namespace {

// Points into `type`; an absent tensor is dtype INVALID, rank 0.
tdm_tensor_desc to_c(const TensorType* type) {
  tdm_tensor_desc out{};
  out.struct_size = sizeof out;
  out.dtype = TDM_DTYPE_INVALID;
  if (type == nullptr) return out;
  out.dtype = type->dtype;
  out.rank = static_cast<uint32_t>(type->dims.size());
  out.dims = type->dims.empty() ? nullptr : type->dims.data();
  return out;
}

std::string node_text(const OpSpec& spec) {
  std::string text = "node '" + spec.node_name + "'";
  if (!spec.layer.empty() && spec.layer != spec.node_name) text += " of layer '" + spec.layer + "'";
  return text;
}

}  // namespace

Result<OpSpec> op_spec_of(const Graph& graph, const Node& node) {
  OpSpec spec;
  spec.op = node.op;
  spec.node_name = node.name;
  spec.layer = node.layer;
  spec.attrs = node.attrs;
  for (ValueId id : node.inputs) {
    if (id == kNoValue) {
      spec.inputs.emplace_back(std::nullopt);
      continue;
    }
    const Value* value = graph.value(id);
    if (value == nullptr)
      return make_error("node '" + node.name + "' reads unknown value " + std::to_string(id),
                        TDM_INVALID_ARGUMENT);
    spec.inputs.emplace_back(value->type);
  }
  for (ValueId id : node.outputs) {
    const Value* value = graph.value(id);
    if (value == nullptr)
      return make_error("node '" + node.name + "' writes unknown value " + std::to_string(id),
                        TDM_INVALID_ARGUMENT);
    spec.outputs.push_back(value->type);
  }
  return spec;
}

std::string op_signature(const OpSpec& spec) {
  std::string text = spec.op;
  bool first = true;
  for (const auto& input : spec.inputs) {
    if (!input) continue;
    text += (first ? " " : " x ") + type_text(*input);
    first = false;
  }
  return text;
}

OpDescC::OpDescC(const LoadedPlugin& backend, const OpSpec& spec) {
  for (const Attr& attr : spec.attrs) attrs.push_back(attr_to_c(attr));
  for (const auto& input : spec.inputs) inputs.push_back(to_c(input ? &*input : nullptr));
  for (const TensorType& output : spec.outputs) outputs.push_back(to_c(&output));
  desc.struct_size = sizeof desc;  // a 1.0 plugin reads the fields it knows
  desc.op = spec.op.c_str();
  desc.op_version = 1;
  desc.attrs = attrs.empty() ? nullptr : attrs.data();
  desc.n_attrs = attrs.size();
  desc.inputs = inputs.empty() ? nullptr : inputs.data();
  desc.n_inputs = inputs.size();
  desc.outputs = outputs.empty() ? nullptr : outputs.data();
  desc.n_outputs = outputs.size();
  // node_name arrived in ABI 1.1: only a plugin that negotiated it reads it.
  desc.node_name = backend.abi_minor_effective >= 1 ? spec.node_name.c_str() : nullptr;
  // layouts arrived in ABI 1.3; native ones only ever come from the
  // backend's own kernel_layouts answer (native_layouts.hpp).
  const bool has_layouts = spec.layouts.size() == inputs.size() + outputs.size();
  desc.layouts = backend.abi_minor_effective >= 3 && has_layouts ? spec.layouts.data() : nullptr;
}

Result<KernelBinding> KernelBinding::prepare(const DeviceHandle& device, const OpSpec& spec) {
  const LoadedPlugin& backend = device.backend();
  const OpDescC c_desc(backend, spec);
  const tdm_op_desc& desc = c_desc.desc;

  tdm_kernel* kernel = nullptr;
  size_t workspace = 0;
  clear_last_error();
  tdm_status status = call_plugin(backend, "kernel_prepare", [&] {
    return backend.backend->kernel_prepare(device.get(), &desc, &kernel, &workspace);
  });
  if (status == TDM_OK && kernel != nullptr) return KernelBinding(backend, kernel, workspace);

  std::optional<LastError> why = take_last_error();
  std::string reason = why && !why->message.empty() ? why->message : silent_failure(status);
  const char* verb = status == TDM_UNSUPPORTED ? "cannot run" : "rejected";
  if (status == TDM_OK) {  // OK without a kernel breaks the contract
    reason = "kernel_prepare returned OK but no kernel";
    status = TDM_INTERNAL;
  }
  // Declining is a normal answer (sdk/ABI.md rule 28); anything else is the
  // backend failing on a description the host built.
  Error error{"backend " + backend.name + " " + verb + " " + node_text(spec) + " (" + op_signature(spec) +
                  "): " + reason,
              status, status != TDM_UNSUPPORTED};
  return error;
}

KernelBinding::KernelBinding(KernelBinding&& other) noexcept
    : backend_(other.backend_),
      kernel_(std::exchange(other.kernel_, nullptr)),
      workspace_(other.workspace_) {}

KernelBinding& KernelBinding::operator=(KernelBinding&& other) noexcept {
  if (this != &other) {
    release();
    backend_ = other.backend_;
    kernel_ = std::exchange(other.kernel_, nullptr);
    workspace_ = other.workspace_;
  }
  return *this;
}

KernelBinding::~KernelBinding() {
  release();
}

void KernelBinding::release() noexcept {
  if (kernel_ != nullptr)
    call_plugin(*backend_, "kernel_release", [&] { backend_->backend->kernel_release(kernel_); });
  kernel_ = nullptr;
}

std::string KernelBinding::describe() const {
  if (kernel_ == nullptr) return "";
  auto fn = TANDEM_OPTIONAL_FN(*backend_, backend, tdm_backend_api, kernel_describe, 1);
  const char* text = fn != nullptr ? fn(kernel_) : nullptr;
  return text != nullptr ? text : "";
}

}  // namespace tandem::host::exec
