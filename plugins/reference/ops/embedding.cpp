// Reference backend — embedding lookup and its gradient.
//
// padding_idx < 0 means "no padding row" (unlike PyTorch, a negative value
// is not counted from the end). The padding row is looked up like any other
// row; its gradient is always zero. An index outside [0, V) is an error at
// launch, naming the index and its position — except for a vocabulary slice
// (vocab_start >= 0), where it reads a zero row.
#include "common.hpp"

namespace tandem::reference {
namespace {

// Rows of the table; -1 for an index outside a vocabulary slice's range.
std::vector<int64_t> checked_indices(const std::string& where, const void* data, int64_t n, int64_t V,
                                     int64_t vocab_start) {
  std::vector<int64_t> idx = load_indices(data, TDM_S32, n);
  if (vocab_start >= 0) {
    for (int64_t& i : idx) i = i >= vocab_start && i - vocab_start < V ? i - vocab_start : -1;
    return idx;
  }
  for (int64_t i = 0; i < n; ++i)
    if (idx[size_t(i)] < 0 || idx[size_t(i)] >= V)
      throw Error(TDM_INVALID_ARGUMENT, where + ": index " + std::to_string(idx[size_t(i)]) +
                                            " at position " + std::to_string(i) + " is out of range [0, " +
                                            std::to_string(V) + ")");
  return idx;
}

// y[..., :] = table[indices[...], :]
std::unique_ptr<Kernel> embedding(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const int64_t V = c.in(0).dims[0], D = c.in(0).dims[1];
  const int64_t n = c.in(1).numel();
  const int64_t start = c.int_attr("vocab_start");
  const std::string where = c.where();
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const std::vector<int64_t> idx = checked_indices(where, in[1], n, V, start);
    const auto table = load<double>(in[0], dt, V * D);  // exact: a pure copy
    std::vector<double> rows(size_t(n * D), 0.0);
    for (int64_t i = 0; i < n; ++i)
      if (idx[size_t(i)] >= 0)
        for (int64_t d = 0; d < D; ++d) rows[size_t(i * D + d)] = table[size_t(idx[size_t(i)] * D + d)];
    store(out[0], dt, rows);
  });
}

// dtable[v, :] = Σ over positions i with indices[i] == v of dy[i, :];
// dtable[padding_idx, :] = 0.
std::unique_ptr<Kernel> embedding_grad(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  const int64_t V = c.out(0).dims[0], D = c.out(0).dims[1];
  const int64_t n = c.in(1).numel();
  const int64_t pad = c.int_attr("padding_idx");  // below V (the shape rule)
  const int64_t start = c.int_attr("vocab_start");
  const std::string where = c.where();
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const std::vector<int64_t> idx = checked_indices(where, in[1], n, V, start);
    const auto g = load<double>(in[0], dt, n * D);
    std::vector<double> dtable(size_t(V * D), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      if (idx[size_t(i)] < 0 || idx[size_t(i)] == pad) continue;
      for (int64_t d = 0; d < D; ++d) dtable[size_t(idx[size_t(i)] * D + d)] += g[size_t(i * D + d)];
    }
    store(out[0], dt, dtable);
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("embedding", embedding);
  r.add("embedding_grad", embedding_grad);
});

}  // namespace

}  // namespace tandem::reference
