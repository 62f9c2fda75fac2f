// Reference backend — sgd_update (PyTorch's SGD).
//
// Elementwise in the compute type (float for f32); hyperparameters are
// rounded to it once. lr is a device scalar so schedules need no re-prepare.
// Outputs may alias inputs as the catalog allows: all inputs are loaded
// before any output is stored.
#include "common.hpp"

namespace tandem::reference {
namespace {

// sgd: g = grad + wd·param; with momentum: buf = momentum·buf + (1-dampening)·g
// (buf starts at zero: the host zero-initialises it), g = nesterov ? g + momentum·buf : buf;
// param -= lr·g.
std::unique_ptr<Kernel> sgd_update(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  const Dims shape = c.in(0).dims;
  const double momentum = c.float_attr("momentum", 0.0), dampening = c.float_attr("dampening");
  const double wd = c.float_attr("weight_decay", 0.0);
  const bool nesterov = c.int_attr("nesterov") != 0;
  const bool has_buf = c.has_input(3);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = numel(shape);
      std::vector<T> param = load<T>(in[0], dt, n);
      const std::vector<T> grad = load<T>(in[1], dt, n);
      const T lr = load<T>(in[2], dt, 1)[0];
      std::vector<T> buf = has_buf ? load<T>(in[3], dt, n) : std::vector<T>();
      for (size_t i = 0; i < param.size(); ++i) {
        T g = grad[i] + T(wd) * param[i];
        if (has_buf) {
          buf[i] = T(momentum) * buf[i] + T(1.0 - dampening) * g;
          g = nesterov ? g + T(momentum) * buf[i] : buf[i];
        }
        param[i] -= lr * g;
      }
      store(out[0], dt, param);
      if (has_buf) store(out[1], dt, buf);
    });
  });
}

[[maybe_unused]] const bool registered =
    sections().enlist([](Registry& r) { r.add("sgd_update", sgd_update); });

}  // namespace

}  // namespace tandem::reference
