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
  c.input_dtype(1, {dt});
  c.input_rank_at_least(0, 2);
  c.input_rank_at_least(1, 2);
  const bool ta = c.int_attr("transpose_a") != 0, tb = c.int_attr("transpose_b") != 0;
  const Dims a = c.in(0).dims, b = c.in(1).dims;
  const int64_t M = ta ? a[a.size() - 1] : a[a.size() - 2], Ka = ta ? a[a.size() - 2] : a[a.size() - 1];
  const int64_t Kb = tb ? b[b.size() - 1] : b[b.size() - 2], N = tb ? b[b.size() - 2] : b[b.size() - 1];
  if (Ka != Kb)
    c.fail("inner dimensions differ: a " + dims_str(a) + " gives K=" + std::to_string(Ka) + ", b " +
           dims_str(b) + " gives K=" + std::to_string(Kb));
  const Dims a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  Dims batch;
  if (!broadcast_shapes(a_batch, b_batch, batch))
    c.fail("batch dimensions " + dims_str(a_batch) + " and " + dims_str(b_batch) + " do not broadcast");
  Dims y = batch;
  y.push_back(M);
  y.push_back(N);
  c.output(0, dt, y);
  const int64_t K = Ka;
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
