// The host's access to a DeviceExecutor's values: whole-value copies in and
// out, fill, and the staged inputs (a second buffer per input, so the next
// batch's copy overlaps the current step).
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "exec/device_executor.hpp"
#include "exec/tensor_text.hpp"
#include "plugin/plugin_call.hpp"
#include "tandem/half.hpp"
#include "util/format.hpp"
#include "util/last_error.hpp"

namespace tandem::host::exec {

Result<const ValueStorage*> DeviceExecutor::checked(ValueId value, size_t bytes, const char* action) const {
  const ValueStorage* storage = plan_.find(value);
  if (storage == nullptr)
    return make_error(
        std::string("cannot ") + action + " value " + std::to_string(value) + ": not in the plan",
        TDM_INVALID_ARGUMENT);
  if (storage->native)
    return make_error(std::string("cannot ") + action + " value " + std::to_string(value) +
                          ": it is in the backend's native layout, private to its kernels; list it in "
                          "ExecutorOptions::outputs to keep it plain",
                      TDM_INVALID_ARGUMENT);
  if (bytes != storage->bytes)
    return make_error(std::string("cannot ") + action + " value " + std::to_string(value) + ": " +
                          std::to_string(bytes) + " bytes given, it holds " + std::to_string(storage->bytes),
                      TDM_INVALID_ARGUMENT);
  return storage;
}

Result<void> DeviceExecutor::write(ValueId value, const void* host, size_t bytes) {
  auto storage = checked(value, bytes, "write");
  if (!storage) return storage.error();
  if (staged_) staged_->discard(value);
  if (void* home = stream_home(value)) {  // every run ends with its copies complete
    std::memcpy(home, host, bytes);
    return {};
  }
  clear_last_error();
  tdm_status status = api().copy_h2d(stream_.get(), device_pointer(value), host, bytes);
  if (status != TDM_OK)
    return make_error("copy to " + device_->id() + " failed: " + plugin_reason(status), status);
  return synchronize();
}

Result<void> DeviceExecutor::read(ValueId value, void* host, size_t bytes) {
  auto storage = checked(value, bytes, "read");
  if (!storage) return storage.error();
  if (const void* home = stream_home(value)) {
    std::memcpy(host, home, bytes);
    return {};
  }
  clear_last_error();
  ++host_reads_;
  host_read_bytes_ += bytes;
  tdm_status status = api().copy_d2h(stream_.get(), host, device_pointer(value), bytes);
  if (status != TDM_OK)
    return make_error("copy from " + device_->id() + " failed: " + plugin_reason(status), status);
  return synchronize();
}

Result<void> DeviceExecutor::fill(ValueId value, double number) {
  const ValueStorage* storage = plan_.find(value);
  if (storage == nullptr)
    return make_error("cannot fill value " + std::to_string(value) + ": not in the plan",
                      TDM_INVALID_ARGUMENT);
  if (storage->native)  // the fill kernel writes plain bytes
    return make_error("cannot fill value " + std::to_string(value) + ": it is in the backend's native layout",
                      TDM_INVALID_ARGUMENT);
  if (stream_home(value) != nullptr) return fill_by_copies(value, number);
  OpSpec spec;
  spec.op = "fill";
  spec.node_name = "fill." + std::to_string(value);
  spec.attrs.push_back({"value", number});
  spec.outputs.push_back(storage->type);
  auto kernel = KernelBinding::prepare(*device_, spec);
  if (!kernel && kernel.error().status == TDM_UNSUPPORTED) return fill_by_copies(value, number);
  if (!kernel) return kernel.error();
  void* workspace = workspace_;
  if (kernel->workspace_bytes() > plan_.workspace_bytes) {
    auto extra = alloc(kernel->workspace_bytes(), "the fill workspace");
    if (extra) held_.workspace += kernel->workspace_bytes();
    if (!extra) return extra.error();
    workspace = *extra;
  }
  void* outputs[1] = {device_pointer(value)};
  clear_last_error();
  tdm_status status = call_plugin(device_->backend(), "kernel_launch", [&] {
    return api().kernel_launch(kernel->get(), stream_.get(), nullptr, outputs, workspace);
  });
  if (status != TDM_OK)
    return plugin_failure("fill of value " + std::to_string(value) + " failed on " + device_->id() + ": " +
                              plugin_reason(status),
                          status);
  return synchronize();  // before the kernel is released
}

namespace {

// `number` in `dtype`, as the bytes of one element.
std::vector<unsigned char> element_bytes(tdm_dtype dtype, double number) {
  std::vector<unsigned char> bytes(dtype_size(dtype));
  auto put = [&](auto v) { std::memcpy(bytes.data(), &v, sizeof v); };
  switch (dtype) {
    case TDM_F32:
      put(static_cast<float>(number));
      break;
    case TDM_F64:
      put(number);
      break;
    case TDM_BF16:
      put(f64_to_bf16(number));
      break;
    case TDM_F16:
      put(f64_to_f16(number));
      break;
    case TDM_S8:
      put(static_cast<int8_t>(number));
      break;
    case TDM_U8:
      put(static_cast<uint8_t>(number));
      break;
    case TDM_S32:
      put(static_cast<int32_t>(number));
      break;
    case TDM_S64:
      put(static_cast<int64_t>(number));
      break;
    default:
      break;
  }
  return bytes;
}

}  // namespace

// A backend need not implement "fill" (sdk/ABI.md rule 36): the value is
// then written from host memory, a chunk of repeated elements at a time, so
// whatever `tandem plan` accepted, training can start.
Result<void> DeviceExecutor::fill_by_copies(ValueId value, double number) {
  const ValueStorage& storage = *plan_.find(value);
  const std::vector<unsigned char> element = element_bytes(storage.type.dtype, number);
  if (element.empty())
    return make_error("cannot fill value " + std::to_string(value) + ": its dtype has no elements to write",
                      TDM_INVALID_ARGUMENT);
  constexpr size_t kChunk = size_t(1) << 20;
  const size_t bytes = storage.bytes;
  std::vector<unsigned char> chunk(std::min(bytes, kChunk / element.size() * element.size()));
  for (size_t i = 0; i < chunk.size(); i += element.size())
    std::memcpy(chunk.data() + i, element.data(), element.size());
  if (auto* home = static_cast<unsigned char*>(stream_home(value))) {  // host memory
    for (size_t done = 0; done < bytes; done += chunk.size())
      std::memcpy(home + done, chunk.data(), std::min(chunk.size(), bytes - done));
    return {};
  }
  auto* target = static_cast<unsigned char*>(device_pointer(value));
  for (size_t done = 0; done < bytes; done += chunk.size()) {
    const size_t n = std::min(chunk.size(), bytes - done);
    clear_last_error();
    const tdm_status status = api().copy_h2d(stream_.get(), target + done, chunk.data(), n);
    if (status != TDM_OK)
      return make_error("filling value " + std::to_string(value) + " on " + device_->id() +
                            " by copies failed: " + plugin_reason(status),
                        status);
    if (auto r = synchronize(); !r) return r;  // the chunk is reused
  }
  return {};
}

Result<void> DeviceExecutor::allow_staging(ValueId value) {
  if (staged_ && staged_->contains(value)) return {};
  const ValueStorage* storage = plan_.find(value);
  if (storage != nullptr && storage->kind == ValueStorage::Kind::Persistent) {
    const std::string& name = plan_.persistent[storage->persistent].name;
    if (options_.external.count(name) > 0)
      return make_error("cannot stage '" + name + "': its buffer belongs to another executor (external)",
                        TDM_INVALID_ARGUMENT);
  }
  Plan planned = plan_;
  if (auto r = plan_staged_input(planned, value); !r) return r;
  if (auto r = check_budget(planned.estimate); !r) return r;
  if (!staged_) {
    auto created = StagedInputs::create(*device_);
    if (!created) return created.error();
    staged_.emplace(std::move(*created));
  }
  const PersistentBuffer& buffer = planned.persistent[storage->persistent];
  auto spare =
      alloc(buffer.bytes + plan_.guard_bytes, "the second buffer of '" + buffer.name + "' (staged input)");
  if (!spare) return spare.error();
  held_.inputs += buffer.bytes + plan_.guard_bytes;
  plan_ = std::move(planned);
  // Every place that holds the value's address; arena values never share a
  // persistent value's address, so equal pointers are exactly its readers
  // and in-place writers.
  void* current = persistent_[storage->persistent];
  std::vector<void**> references = {&persistent_[storage->persistent]};
  for (NodeRun& node : nodes_) {
    for (void*& pointer : node.inputs)
      if (pointer == current) references.push_back(&pointer);
    for (void*& pointer : node.outputs)
      if (pointer == current) references.push_back(&pointer);
  }
  staged_->add(value, buffer.name, buffer.bytes, *spare, std::move(references));
  return {};
}

Result<void*> DeviceExecutor::reserve_buffer(size_t bytes, const std::string& what) {
  Plan planned = plan_;
  plan_buffer(planned, bytes);
  if (auto r = check_budget(planned.estimate); !r)
    return make_error(
        what + " (" + human_bytes(bytes) + ") does not fit beside the plan: " + r.error().message,
        r.error().status);
  auto buffer = alloc(bytes, what);
  if (!buffer) return buffer.error();
  held_.buffers += bytes;
  plan_ = std::move(planned);
  return buffer;
}

Result<void> DeviceExecutor::stage(ValueId value, const void* host, size_t bytes) {
  auto storage = checked(value, bytes, "stage");
  if (!storage) return storage.error();
  if (!staged_ || !staged_->contains(value)) {
    const bool named = (*storage)->kind == ValueStorage::Kind::Persistent;
    return make_error(
        "cannot stage " +
            (named ? "'" + plan_.persistent[(*storage)->persistent].name + "'"
                   : "value " + std::to_string(value)) +
            ": it has no second buffer; call allow_staging for it first (only inputs can be staged)",
        TDM_INVALID_ARGUMENT);
  }
  return staged_->stage(value, host, bytes);
}

Result<void> DeviceExecutor::use_staged() {
  if (!staged_) return {};
  return staged_->use(stream_.get());
}

}  // namespace tandem::host::exec
