// Reference backend — batch_norm (train, inference) and its gradient.
//
// Statistics and the normalisation itself are computed in double and rounded
// once on store. The variance used to normalise is biased (divides by the
// count); rstd = 1/sqrt(var + epsilon).
#include <cmath>

#include "common.hpp"

namespace tandem::reference {
namespace {

// x[N,C,...] seen as [N, C, L] (L = spatial size); per-channel statistics
// over the M = N·L elements.
struct Channels {
  int64_t N, C, L;
  int64_t at(int64_t n, int64_t c, int64_t l) const { return (n * C + c) * L + l; }
  int64_t M() const { return N * L; }
};

// x [N, C, ...] in slot x_input (its rank and the [C] tensors the shape rule's).
Channels channels(const Check& c, size_t x_input) {
  const Dims& x = c.in(x_input).dims;
  const int64_t nc = x[0] * x[1];
  Channels ch{x[0], x[1], nc != 0 ? numel(x) / nc : 0};
  return ch;
}

// ---- batch_norm_train (PyTorch semantics: the running variance is updated
// with the unbiased batch variance, the output uses the biased one).
std::unique_ptr<Kernel> batch_norm_train(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  const Channels ch = channels(c, 0);
  const double eps = epsilon_attr(c), momentum = c.float_attr("momentum", 0.1);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const int64_t n_x = ch.N * ch.C * ch.L;
    const auto x = load<double>(in[0], dt, n_x), gamma = load<double>(in[1], dt, ch.C),
               beta = load<double>(in[2], dt, ch.C), run_mean = load<double>(in[3], dt, ch.C),
               run_var = load<double>(in[4], dt, ch.C);
    std::vector<double> y(x.size()), mean(static_cast<size_t>(ch.C)), rstd(static_cast<size_t>(ch.C)),
        new_mean(static_cast<size_t>(ch.C)), new_var(static_cast<size_t>(ch.C));
    for (int64_t k = 0; k < ch.C; ++k) {
      double m = 0, var = 0;
      for (int64_t n = 0; n < ch.N; ++n)
        for (int64_t l = 0; l < ch.L; ++l) m += x[size_t(ch.at(n, k, l))];
      m /= double(ch.M());
      for (int64_t n = 0; n < ch.N; ++n)
        for (int64_t l = 0; l < ch.L; ++l)
          var += (x[size_t(ch.at(n, k, l))] - m) * (x[size_t(ch.at(n, k, l))] - m);
      const double biased = var / double(ch.M()), unbiased = var / double(ch.M() - 1);
      const size_t kk = size_t(k);
      mean[kk] = m;
      rstd[kk] = 1.0 / std::sqrt(biased + eps);
      new_mean[kk] = (1 - momentum) * run_mean[kk] + momentum * m;
      new_var[kk] = (1 - momentum) * run_var[kk] + momentum * unbiased;
      for (int64_t n = 0; n < ch.N; ++n)
        for (int64_t l = 0; l < ch.L; ++l) {
          const size_t e = size_t(ch.at(n, k, l));
          y[e] = (x[e] - m) * rstd[kk] * gamma[kk] + beta[kk];
        }
    }
    store(out[0], dt, y);
    store(out[1], dt, mean);
    store(out[2], dt, rstd);
    store(out[3], dt, new_mean);
    store(out[4], dt, new_var);
  });
}

// ---- batch_norm_inference: y = (x - mean)/sqrt(var + eps)·gamma + beta
std::unique_ptr<Kernel> batch_norm_inference(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  const Channels ch = channels(c, 0);
  const double eps = epsilon_attr(c);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const auto x = load<double>(in[0], dt, ch.N * ch.C * ch.L), gamma = load<double>(in[1], dt, ch.C),
               beta = load<double>(in[2], dt, ch.C), mean = load<double>(in[3], dt, ch.C),
               var = load<double>(in[4], dt, ch.C);
    std::vector<double> y(x.size());
    for (int64_t n = 0; n < ch.N; ++n)
      for (int64_t k = 0; k < ch.C; ++k)
        for (int64_t l = 0; l < ch.L; ++l) {
          const size_t e = size_t(ch.at(n, k, l)), kk = size_t(k);
          y[e] = (x[e] - mean[kk]) / std::sqrt(var[kk] + eps) * gamma[kk] + beta[kk];
        }
    store(out[0], dt, y);
  });
}

// ---- batch_norm_grad: per channel, with x̂ = (x - mean)·rstd,
//   dx = gamma·rstd·(dy - mean_M(dy) - x̂·mean_M(dy·x̂)), dgamma = Σ dy·x̂, dbeta = Σ dy.
std::unique_ptr<Kernel> batch_norm_grad(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  const Channels ch = channels(c, 1);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const int64_t n_x = ch.N * ch.C * ch.L;
    const auto dy = load<double>(in[0], dt, n_x), x = load<double>(in[1], dt, n_x),
               gamma = load<double>(in[2], dt, ch.C), mean = load<double>(in[3], dt, ch.C),
               rstd = load<double>(in[4], dt, ch.C);
    std::vector<double> dx(x.size()), dgamma(size_t(ch.C), 0.0), dbeta(size_t(ch.C), 0.0);
    for (int64_t k = 0; k < ch.C; ++k) {
      const size_t kk = size_t(k);
      auto xhat = [&](size_t e) { return (x[e] - mean[kk]) * rstd[kk]; };
      for (int64_t n = 0; n < ch.N; ++n)
        for (int64_t l = 0; l < ch.L; ++l) {
          const size_t e = size_t(ch.at(n, k, l));
          dgamma[kk] += dy[e] * xhat(e);
          dbeta[kk] += dy[e];
        }
      const double M = double(ch.M());
      for (int64_t n = 0; n < ch.N; ++n)
        for (int64_t l = 0; l < ch.L; ++l) {
          const size_t e = size_t(ch.at(n, k, l));
          dx[e] = gamma[kk] * rstd[kk] * (dy[e] - dbeta[kk] / M - xhat(e) * dgamma[kk] / M);
        }
    }
    store(out[0], dt, dx);
    store(out[1], dt, dgamma);
    store(out[2], dt, dbeta);
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("batch_norm_train", batch_norm_train);
  r.add("batch_norm_inference", batch_norm_inference);
  r.add("batch_norm_grad", batch_norm_grad);
});

}  // namespace

}  // namespace tandem::reference
