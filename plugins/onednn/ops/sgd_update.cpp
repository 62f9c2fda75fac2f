// oneDNN backend — sgd_update: own code, one fused pass over
// param/grad/momentum (the update is memory bound), threaded, in-place safe
// (each element is read before it is written); the arithmetic is
// vector_loops.hpp's, compiled for the CPU's vector level.
#include "common.hpp"
#include "vector_loops.hpp"

namespace tandem::onednn {

namespace {

std::unique_ptr<Kernel> sgd_update(const OpView& op, size_t&) {
  Check c(op);
  c.primary_dtype(0, kF32);
  const Dims shape = c.in(0).dims;
  const float momentum = float(c.float_attr("momentum", 0.0)), dampening = float(c.float_attr("dampening"));
  const float wd = float(c.float_attr("weight_decay", 0.0));
  const bool nesterov = c.int_attr("nesterov") != 0, has_buf = c.has_input(3);
  const int64_t n = numel(shape);
  const float damp = 1.f - dampening;
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    const float* param = static_cast<const float*>(in[0]);
    const float* grad = static_cast<const float*>(in[1]);
    const loops::Sgd h{*static_cast<const float*>(in[2]), wd, momentum, damp, nesterov};
    float* po = static_cast<float*>(out[0]);
    const float* buf = has_buf ? static_cast<const float*>(in[3]) : nullptr;
    float* bo = has_buf ? static_cast<float*>(out[1]) : nullptr;
    over_chunks(n, loops::kUpdateChunk, [&](int64_t c0, int64_t len) {
      loops::sgd(h, param + c0, grad + c0, buf ? buf + c0 : nullptr, po + c0, bo ? bo + c0 : nullptr, len);
    });
  });
}

[[maybe_unused]] const bool registered =
    sections().enlist([](Registry& r) { r.add("sgd_update", sgd_update); });

}  // namespace

}  // namespace tandem::onednn
