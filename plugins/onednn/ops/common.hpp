// oneDNN backend — what every op file shares: prepare-time validation
// (Check), the two kernel classes (PrimKernel: cached oneDNN primitives;
// FnKernel: own C++ code), the process-wide engine, bf16 helpers and the
// workspace plan.
//
// Lifetime rule: everything a launch needs — primitives, memory objects,
// argument maps — is built in prepare. A launch only rebinds data handles
// (dnnl::memory::set_data_handle, no allocation) and executes. oneDNN's own
// scratchpad is in user mode and lives in the kernel's workspace. A kernel is
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
#include "tandem/shape_util.hpp"
#include "tandem/tandem.hpp"

namespace tandem::onednn {

inline const std::vector<tdm_dtype> kF32 = {TDM_F32};
inline const std::vector<tdm_dtype> kF32Bf16 = {TDM_F32, TDM_BF16};
inline const std::vector<tdm_dtype> kAll = {TDM_F32, TDM_F64, TDM_F16, TDM_BF16,
                                            TDM_S8,  TDM_U8,  TDM_S32, TDM_S64};

// Prepare-time validation; messages start with the op and node.
class Check {
 public:
  explicit Check(const OpView& op) : op_(op) {}
  const OpView& op() const { return op_; }
  std::string where() const;
  [[noreturn]] void fail(const std::string& what) const;        // TDM_INVALID_ARGUMENT
  [[noreturn]] void unsupported(const std::string& why) const;  // TDM_UNSUPPORTED
  void counts(size_t min_in, size_t max_in, size_t min_out, size_t max_out) const;
  bool has_input(size_t i) const;
  bool has_output(size_t j) const;
  const TensorShape& in(size_t i) const { return op_.inputs().at(i); }
  const TensorShape& out(size_t j) const { return op_.outputs().at(j); }
  tdm_dtype primary_dtype(size_t input, const std::vector<tdm_dtype>& allowed) const;
  tdm_dtype primary_output_dtype(size_t output, const std::vector<tdm_dtype>& allowed) const;
  void input_dtype(size_t i, const std::vector<tdm_dtype>& allowed) const;
  void input_shape(size_t i, const Dims& expected) const;
  void input(size_t i, tdm_dtype dtype, const Dims& expected) const;
  void output(size_t j, tdm_dtype dtype, const Dims& expected) const;
  void input_rank_at_least(size_t i, size_t rank) const;
  int64_t int_attr(const char* name, int64_t f) const { return op_.int_attr(name, f); }
  double float_attr(const char* name, double f) const { return op_.float_attr(name, f); }
  std::string string_attr(const char* name, const std::string& f) const { return op_.string_attr(name, f); }
  std::vector<int64_t> ints_attr(const char* name, std::vector<int64_t> f) const {
    return op_.ints_attr(name, std::move(f));
  }
  std::vector<int64_t> pair_attr(const char* name, std::vector<int64_t> fallback) const;
  size_t axis(int64_t axis, size_t rank, const char* what) const;

 private:
  const OpView& op_;
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
  // Own code run at this point of the sequence.
  void hook(Hook h) { steps_.push_back({dnnl::primitive(), {}, std::move(h)}); }
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

// A kernel that is plain C++ (a closure over what prepare validated).
class FnKernel final : public Kernel {
 public:
  using Fn = std::function<void(void* const* in, void* const* out, void* ws)>;
  FnKernel(std::string name, Fn fn) : name_("onednn:own:" + std::move(name)), fn_(std::move(fn)) {}
  void launch(Stream&, void* const* in, void* const* out, void* ws) override { fn_(in, out, ws); }
  const char* describe() const noexcept override { return name_.c_str(); }

 private:
  std::string name_;
  Fn fn_;
};

inline std::unique_ptr<Kernel> make_fn(const Check& c, FnKernel::Fn fn) {
  return std::make_unique<FnKernel>(c.op().op(), std::move(fn));
}

// ---------------------------------------------------------------------------
// bf16 and threading helpers
// ---------------------------------------------------------------------------
inline float bf16_to_f32(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {  // nearest-even; NaN stays a quiet NaN
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
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

// Registration of each op family (one per ops/*.cpp).
using Factory = std::unique_ptr<Kernel> (*)(const OpView&, size_t& workspace);
using Registrar = std::function<void(const char* name, Factory)>;
void register_matmul(const Registrar& add);
void register_conv(const Registrar& add);
void register_pool(const Registrar& add);
void register_eltwise(const Registrar& add);
void register_binary(const Registrar& add);
void register_norm(const Registrar& add);
void register_loss(const Registrar& add);
void register_tensor(const Registrar& add);
void register_cast(const Registrar& add);
void register_optim(const Registrar& add);
void register_quant(const Registrar& add);
void register_quant_conv(const Registrar& add);

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_OPS_COMMON_HPP
