#include "layout.hpp"

#include <cstdlib>

#include "dnnl_api.hpp"

namespace tandem::onednn {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

bool disabled_by_environment() {
  const char* v = std::getenv("TANDEM_ONEDNN_NATIVE_LAYOUTS");
  return v != nullptr && std::string(v) == "0";
}

// The channel block of the activations oneDNN's convolution picks when left
// free on this CPU (nChw16c with AVX-512, nChw8c with AVX2), or 0 for any
// other choice. Asked once, with a primitive descriptor (no primitive is
// created).
int preferred_block() {
  try {
    const memory::dims x{1, 16, 8, 8}, w{16, 16, 3, 3};
    const auto any = [](const memory::dims& d) { return memory::desc(d, memory::data_type::f32, tag::any); };
    const auto pd = convolution_forward_pd(dnnl::prop_kind::forward_training,
                                           {any(x), any(w), any(x), nullptr, {1, 1}, {0, 0}, {1, 1}, {1, 1}},
                                           dnnl::primitive_attr());
    if (pd.dst_desc() == memory::desc(x, memory::data_type::f32, tag::nChw16c)) return 16;
    if (pd.dst_desc() == memory::desc(x, memory::data_type::f32, tag::nChw8c)) return 8;
    return 0;
  } catch (...) {
    return 0;
  }
}

}  // namespace

int native_block() {
  static const int block = disabled_by_environment() ? 0 : preferred_block();
  return block;
}

bool native_eligible(const TensorShape& t) {
  const int b = native_block();
  return b > 0 && t.dtype == TDM_F32 && t.rank() == 4 && t.dims[1] > 0 && t.dims[1] % b == 0;
}

memory::desc layout_md(const TensorShape& t, bool native) {
  if (native)
    return memory::desc(to_dnnl(t.dims), dnnl_type(t.dtype),
                        native_block() == 16 ? tag::nChw16c : tag::nChw8c);
  return plain_md(t.dims, t.dtype);
}

void LayoutAnswer::accept(const OpView& op, size_t input) const {
  if (input < op.inputs().size() && native_eligible(op.inputs()[input])) accepts[input] = 1;
}

void LayoutAnswer::offer(const OpView& op, size_t output) const {
  if (output >= op.outputs().size() || !native_eligible(op.outputs()[output])) return;
  offers[output] = 1;
  native_bytes[output] = layout_md(op.outputs()[output], true).get_size();
}

Slot input_in_layout(PrimKernel& k, const Check& c, size_t i, bool want_native) {
  const bool have = c.op().input_native(i);
  if (have == want_native) return in_slot(i);
  const memory::desc from = layout_md(c.in(i), have), to = layout_md(c.in(i), want_native);
  const Slot staged{Slot::workspace, k.reserve(to.get_size())};
  const dnnl::reorder::primitive_desc rpd(engine(), from, engine(), to, user_scratchpad_attr());
  k.add<dnnl::reorder>(rpd, {{DNNL_ARG_FROM, k.bind(from, in_slot(i))}, {DNNL_ARG_TO, k.bind(to, staged)}});
  return staged;
}

memory staged_in(PrimKernel& k, const memory::desc& user, const memory::desc& chosen, Slot slot) {
  if (chosen == user) return k.bind(user, slot);
  memory staged = k.bind(chosen, {Slot::workspace, k.reserve(chosen.get_size())});
  const memory src = k.bind(user, slot);
  const dnnl::reorder::primitive_desc rpd(engine(), user, engine(), chosen, user_scratchpad_attr());
  k.add<dnnl::reorder>(rpd, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, staged}});
  return staged;
}

StagedOut staged_out(PrimKernel& k, const memory::desc& user, const memory::desc& chosen, Slot slot) {
  const memory u = k.bind(user, slot);
  if (chosen == user) return {u, u};
  return {u, k.bind(chosen, {Slot::workspace, k.reserve(chosen.get_size())})};
}

void staged_out_finish(PrimKernel& k, const StagedOut& o) {
  if (!o.staged()) return;
  const dnnl::reorder::primitive_desc rpd(engine(), o.chosen.get_desc(), engine(), o.user.get_desc(),
                                          user_scratchpad_attr());
  k.add<dnnl::reorder>(rpd, {{DNNL_ARG_FROM, o.chosen}, {DNNL_ARG_TO, o.user}});
}

}  // namespace tandem::onednn
