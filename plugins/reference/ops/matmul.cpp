// Reference backend — matmul: batched, numpy broadcasting of the batch
// dims, optional transposes.
//
// Plain triple loops; dot products accumulate in double.
#include "common.hpp"

namespace tandem::reference {
namespace {

// ---- matmul: y[...,M,N] = op(a)[...,M,K] · op(b)[...,K,N], batch dims broadcast.
std::unique_ptr<Kernel> matmul(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const bool ta = c.int_attr("transpose_a") != 0, tb = c.int_attr("transpose_b") != 0;
  const Dims a = c.in(0).dims, b = c.in(1).dims;
  // The shape rule has checked the ranks (>= 2), that a and b agree on K and
  // that the batch dims broadcast.
  const int64_t M = ta ? a[a.size() - 1] : a[a.size() - 2], K = ta ? a[a.size() - 2] : a[a.size() - 1];
  const int64_t N = tb ? b[b.size() - 2] : b[b.size() - 1];
  const Dims a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  Dims batch;
  broadcast_shapes(a_batch, b_batch, batch);
  Dims y = batch;
  y.push_back(M);
  y.push_back(N);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> av = load<T>(in[0], dt, numel(a)), bv = load<T>(in[1], dt, numel(b));
      std::vector<T> yv(size_t(numel(y)));
      for (int64_t n = 0; n < numel(batch); ++n) {
        const T* ap = av.data() + broadcast_source(n, batch, a_batch) * M * K;
        const T* bp = bv.data() + broadcast_source(n, batch, b_batch) * K * N;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double acc = 0;
            for (int64_t k = 0; k < K; ++k)
              acc += double(ta ? ap[k * M + i] : ap[i * K + k]) * double(tb ? bp[j * K + k] : bp[k * N + j]);
            yv[size_t((n * M + i) * N + j)] = T(acc);
          }
      }
      store(out[0], dt, yv);
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) { r.add("matmul", matmul); });

}  // namespace

}  // namespace tandem::reference
