// oneDNN backend — the engine and the primitive kernel.
#include "common.hpp"

namespace tandem::onednn {

// ---------------------------------------------------------------------------
// oneDNN plumbing
// ---------------------------------------------------------------------------
dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

std::atomic<uint64_t>& primitives_created() {
  static std::atomic<uint64_t> n{0};
  return n;
}

dnnl::memory::data_type dnnl_type(tdm_dtype dtype) {
  switch (dtype) {
    case TDM_F32:
      return dnnl::memory::data_type::f32;
    case TDM_BF16:
      return dnnl::memory::data_type::bf16;
    case TDM_F16:
      return dnnl::memory::data_type::f16;
    case TDM_S32:
      return dnnl::memory::data_type::s32;
    case TDM_S8:
      return dnnl::memory::data_type::s8;
    case TDM_U8:
      return dnnl::memory::data_type::u8;
    default:
      throw Unsupported(std::string("onednn: no oneDNN data type for ") + dtype_name(dtype));
  }
}

dnnl::memory::dims to_dnnl(const Dims& d) {
  return dnnl::memory::dims(d.begin(), d.end());
}

dnnl::memory::desc plain_md(const Dims& dims, tdm_dtype dtype) {
  Dims d = dims.empty() ? Dims{1} : dims;  // a scalar is one element
  return dnnl::memory::desc(to_dnnl(d), dnnl_type(dtype), to_dnnl(strides_of(d)));
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

size_t PrimKernel::reserve(size_t bytes) {
  const size_t offset = ws_bytes_;
  ws_bytes_ += (bytes + 63) / 64 * 64;
  return offset;
}

dnnl::memory PrimKernel::bind(const dnnl::memory::desc& md, Slot slot) {
  dnnl::memory m(md, engine(), DNNL_MEMORY_NONE);
  bindings_.emplace_back(m, slot);
  return m;
}

void PrimKernel::add_step(dnnl::primitive p, const dnnl::primitive_desc_base& pd,
                          std::unordered_map<int, dnnl::memory> args) {
  ++primitives_created();
  const dnnl::memory::desc scratch = pd.scratchpad_desc();
  if (scratch.get_size() > 0)
    args[DNNL_ARG_SCRATCHPAD] = bind(scratch, {Slot::workspace, reserve(scratch.get_size())});
  if (pd.get_kind() == dnnl::primitive::kind::reorder) ++reorders_;
  if (!impl_.empty()) impl_ += "+";
  impl_ += pd.impl_info_str();
  steps_.push_back({std::move(p), std::move(args), nullptr});
}

void PrimKernel::hook(Hook h, const char* impl) {
  if (impl != nullptr) impl_ += (impl_.empty() ? "" : "+") + std::string(impl);
  steps_.push_back({dnnl::primitive(), {}, std::move(h)});
}

void PrimKernel::launch(Stream& stream, void* const* in, void* const* out, void* ws) {
  char* w = static_cast<char*>(ws);
  for (auto& [mem, slot] : bindings_) mem.set_data_handle(slot_address(slot, in, out, w));
  dnnl::stream& s = dnnl_stream(stream);
  for (Step& step : steps_) {
    if (step.hook)
      step.hook(in, out, w);
    else
      step.prim.execute(s, step.args);
  }
}

const char* PrimKernel::describe() const noexcept {
  try {
    described_ = name_ + "(" + impl_ + ") reorders=" + std::to_string(reorders_) +
                 " primitives_created=" + std::to_string(primitives_created().load());
    return described_.c_str();
  } catch (...) {
    return name_.c_str();
  }
}

}  // namespace tandem::onednn
