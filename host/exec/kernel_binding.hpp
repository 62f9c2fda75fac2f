// One prepared backend kernel, owned (RAII): kernel_prepare on creation,
// kernel_release in the destructor.
//
// The op description handed to kernel_prepare is built here from the graph:
// op name, op_version 1, attributes and tensor descriptions of every input
// and output slot. An absent optional input (kNoValue) keeps its slot with
// dtype TDM_DTYPE_INVALID and rank 0 (sdk/ops.md conventions). The arrays
// live only for the duration of the call, as the ABI allows.
//
// Lifetime: the DeviceHandle (and so its plugin) must outlive the binding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "device/device.hpp"
#include "graph/graph.hpp"
#include "util/result.hpp"

namespace tandem::host::exec {

// An op to prepare, independent of any graph (the executor's own "fill").
struct OpSpec {
  std::string op;
  std::string node_name;  // for messages; handed to the plugin from ABI 1.1
  std::string layer;      // for messages only
  std::vector<Attr> attrs;
  std::vector<std::optional<TensorType>> inputs;  // nullopt: absent optional input
  std::vector<TensorType> outputs;
  // tdm_op_desc.layouts (ABI 1.3): inputs then outputs; empty = all plain.
  std::vector<uint8_t> layouts;
};

// The C description of `spec` as `backend` may read it (fields it negotiated
// only). Points into `spec` and into itself: keep both alive and in place
// while `desc` is in use.
struct OpDescC {
  OpDescC(const LoadedPlugin& backend, const OpSpec& spec);
  OpDescC(const OpDescC&) = delete;
  OpDescC& operator=(const OpDescC&) = delete;
  std::vector<tdm_attr> attrs;
  std::vector<tdm_tensor_desc> inputs, outputs;
  tdm_op_desc desc{};
};

// The OpSpec of a graph node (input and output types from its values).
Result<OpSpec> op_spec_of(const Graph& graph, const Node& node);

// "linear f32[128,784] x f32[256,784]": the op and its present inputs.
std::string op_signature(const OpSpec& spec);

class KernelBinding {
 public:
  // Prepares `spec` on `device`. A TDM_UNSUPPORTED answer, or any other
  // failure, is an Error naming the backend, node, layer, op, input types
  // and the plugin's reason; its status is the plugin's status.
  static Result<KernelBinding> prepare(const DeviceHandle& device, const OpSpec& spec);

  KernelBinding(KernelBinding&& other) noexcept;
  KernelBinding& operator=(KernelBinding&& other) noexcept;
  KernelBinding(const KernelBinding&) = delete;
  KernelBinding& operator=(const KernelBinding&) = delete;
  ~KernelBinding();

  tdm_kernel* get() const noexcept { return kernel_; }
  // Scratch device memory each launch needs (0 if none).
  size_t workspace_bytes() const noexcept { return workspace_; }
  // The implementation the kernel resolved to (ABI 1.1, optional), or "".
  std::string describe() const;

 private:
  KernelBinding(const LoadedPlugin& backend, tdm_kernel* kernel, size_t workspace)
      : backend_(&backend), kernel_(kernel), workspace_(workspace) {}
  void release() noexcept;

  const LoadedPlugin* backend_ = nullptr;
  tdm_kernel* kernel_ = nullptr;
  size_t workspace_ = 0;
};

}  // namespace tandem::host::exec
