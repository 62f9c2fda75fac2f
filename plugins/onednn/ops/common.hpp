// oneDNN backend — what every op file shares, on top of the SDK's backend
// kit (tandem/backend_kit.hpp: Check, the registry, closure kernels): the
// kernel of cached oneDNN primitives (PrimKernel), the process-wide engine,
// typed f32/bf16 access, the workspace plan and the registry's entries.
//
// Lifetime rule: everything a launch needs — primitives, memory objects,
// argument maps — is built in prepare. A launch only rebinds data handles
// (dnnl::memory::set_data_handle, no allocation) and executes. oneDNN's own
// scratchpad is in user mode and lives in the kernel's workspace (the one
// exception: oneDNN's sgemm, which some products call, takes its packing
// buffers from the heap; matmul_primitive.cpp). A kernel is
// therefore not re-entrant: launch one kernel object from one thread at a
// time (the host does: a kernel belongs to one stream).
#ifndef TANDEM_ONEDNN_OPS_COMMON_HPP
#define TANDEM_ONEDNN_OPS_COMMON_HPP

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"
#include "tandem/backend_kit.hpp"
#include "tandem/half.hpp"

namespace tandem::onednn {

inline const std::vector<tdm_dtype> kF32 = {TDM_F32};
inline const std::vector<tdm_dtype> kF32Bf16 = {TDM_F32, TDM_BF16};
inline const std::vector<tdm_dtype> kAll = {TDM_F32, TDM_F64, TDM_F16, TDM_BF16,
                                            TDM_S8,  TDM_U8,  TDM_S32, TDM_S64};

// The SDK's Check (tandem/backend_kit.hpp), naming this backend in every
// message.
class Check : public tandem::Check {
 public:
  explicit Check(const OpView& op) : tandem::Check(op, "onednn") {}
};

// ---------------------------------------------------------------------------
// oneDNN plumbing
// ---------------------------------------------------------------------------
dnnl::engine& engine();
// Process-wide count of oneDNN primitives created (tests check that launches
// create none); shown by kernel_describe.
std::atomic<uint64_t>& primitives_created();
dnnl::memory::data_type dnnl_type(tdm_dtype dtype);
dnnl::memory::dims to_dnnl(const Dims& d);
// Dense row-major descriptor.
dnnl::memory::desc plain_md(const Dims& dims, tdm_dtype dtype);
// Attribute with the scratchpad in user mode (it lives in the workspace).
dnnl::primitive_attr user_scratchpad_attr();

// Where a launch finds a tensor's data.
struct Slot {
  enum Kind { input, output, workspace } kind;
  size_t index;  // input/output index, or byte offset into the workspace
};
inline Slot in_slot(size_t i) {
  return {Slot::input, i};
}
inline Slot out_slot(size_t j) {
  return {Slot::output, j};
}
// Where `slot` lies in one launch.
inline void* slot_address(const Slot& slot, void* const* in, void* const* out, char* ws) {
  return slot.kind == Slot::input    ? in[slot.index]
         : slot.kind == Slot::output ? out[slot.index]
                                     : ws + slot.index;
}

// The stream a launch runs on (device.cpp makes every Stream one of these).
dnnl::stream& dnnl_stream(Stream& s);

// A kernel made of cached oneDNN primitives plus optional own-code steps.
class PrimKernel final : public Kernel {
 public:
  using Hook = std::function<void(void* const* in, void* const* out, char* ws)>;
  explicit PrimKernel(std::string name) : name_("onednn:" + std::move(name)) {}

  // Workspace planning: reserves `bytes` (64-byte aligned), returns the offset.
  size_t reserve(size_t bytes);
  size_t workspace_bytes() const { return ws_bytes_; }
  // A memory object bound to `slot` at every launch.
  dnnl::memory bind(const dnnl::memory::desc& md, Slot slot);
  // Appends a primitive created from `pd` (counted), with its arguments; the
  // scratchpad argument is added from the workspace when the pd needs one.
  template <class Prim, class PD>
  void add(const PD& pd, std::unordered_map<int, dnnl::memory> args) {
    add_step(Prim(pd), pd, std::move(args));
  }
  // Own code run at this point of the sequence; `impl`, when given, names
  // the oneDNN routine it calls in describe() (as a primitive's
  // implementation is named).
  void hook(Hook h, const char* impl = nullptr);
  void launch(Stream& stream, void* const* in, void* const* out, void* ws) override;
  const char* describe() const noexcept override;

 private:
  struct Step {
    dnnl::primitive prim;
    std::unordered_map<int, dnnl::memory> args;
    Hook hook;
  };
  void add_step(dnnl::primitive p, const dnnl::primitive_desc_base& pd,
                std::unordered_map<int, dnnl::memory> args);
  std::string name_;
  std::string impl_;
  size_t reorders_ = 0;  // reorder steps per launch, shown by describe()
  mutable std::string described_;
  size_t ws_bytes_ = 0;
  std::vector<std::pair<dnnl::memory, Slot>> bindings_;
  std::vector<Step> steps_;
};

// A kernel that is plain C++: a closure fn(in, out, workspace) over what
// prepare validated, described as "onednn:own:<op>".
template <class Fn>
std::unique_ptr<Kernel> make_fn(const Check& c, Fn fn) {
  return make_fn_kernel("onednn:own:" + c.op().op(), std::move(fn));
}
// The kernel of an op with nothing to compute (an empty output).
inline std::unique_ptr<Kernel> no_op(const Check& c) {
  return make_fn(c, [](void* const*, void* const*, void*) {});
}

// ---------------------------------------------------------------------------
// bf16 and threading helpers
// ---------------------------------------------------------------------------
// Typed element load/store in the compute type float (T = float or uint16_t bf16).
template <class T>
inline float ld(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, float>)
    return p[i];
  else
    return bf16_to_f32(p[i]);
}
template <class T>
inline void st(T* p, int64_t i, float v) {
  if constexpr (std::is_same_v<T, float>)
    p[i] = v;
  else
    p[i] = f32_to_bf16(v);
}
// Calls body(T{}) with T = float for f32 and uint16_t for bf16.
template <class Body>
decltype(auto) with_f32_bf16(tdm_dtype dtype, Body&& body) {
  if (dtype == TDM_BF16) return body(uint16_t{});
  return body(float{});
}

// Below this many elements a loop stays on one thread.
constexpr int64_t kParallelGrain = 32768;

// loop(c0, len) over the chunks [c0, c0 + len) of n elements, `chunk` at a
// time (the last one shorter), shared statically among the threads above
// kParallelGrain elements. The chunks depend on n alone, so what a chunk
// computes does not depend on the thread count.
template <class Loop>
void over_chunks(int64_t n, int64_t chunk, Loop loop) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t c0 = 0; c0 < n; c0 += chunk) loop(c0, n - c0 < chunk ? n - c0 : chunk);
}

// Elementwise conversion between any two dtypes with the catalog's cast
// rules (ops/cast.cpp); fill uses it for its value.
using ConvertFn = void (*)(const void* src, void* dst, int64_t n);
ConvertFn converter(tdm_dtype from, tdm_dtype to);

// ---------------------------------------------------------------------------
// Native layouts (ABI 1.3, ops/layout.hpp): an op's answer to kernel_layouts.
// ---------------------------------------------------------------------------
struct LayoutAnswer {  // the arrays of backend.h's kernel_layouts
  uint8_t* accepts;
  uint8_t* offers;
  uint64_t* native_bytes;
  void accept(const OpView& op, size_t input) const;  // if eligible
  void offer(const OpView& op, size_t output) const;  // if eligible
};
using LayoutFn = void (*)(const OpView& op, const LayoutAnswer& answer);

// ---------------------------------------------------------------------------
// Registration: each section of sdk/ops.md is one ops/<stem>.cpp, whose
// register function adds one registry entry per op and enlists itself in
// sections() while the library loads (device.cpp builds the registry).
// ---------------------------------------------------------------------------
using Factory = std::unique_ptr<Kernel> (*)(const OpView&, size_t& workspace);
struct OpEntry {
  OpEntry(Factory f, LayoutFn l = nullptr) : prepare(f), layouts(l) {}  // NOLINT: implicit from a factory
  Factory prepare;
  LayoutFn layouts;  // nullptr: every tensor plain
};
using Registry = KernelRegistry<OpEntry>;
SectionList<Registry>& sections();
const Registry& registry();

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_OPS_COMMON_HPP
