// oneDNN backend — embedding and its gradient: own code. The indices are
// validated in a short serial pass first (exceptions must not leave an OpenMP
// region); the forward copies rows in parallel, the gradient scatter-adds
// column blocks in parallel with the indices in order (deterministic sums).
#include <algorithm>

#include "common.hpp"

namespace tandem::onednn {

namespace {

// Launch-time index check shared by embedding and its gradient (none for a
// vocabulary slice: there an index outside the slice reads a zero row).
void check_indices(const int32_t* idx, int64_t n, int64_t v, int64_t vocab_start, const std::string& where) {
  if (vocab_start >= 0) return;
  for (int64_t i = 0; i < n; ++i)
    if (idx[i] < 0 || idx[i] >= v)
      throw Error(TDM_INVALID_ARGUMENT, "onednn: " + where + ": index " + std::to_string(idx[i]) +
                                            " at flat position " + std::to_string(i) + " is outside [0, " +
                                            std::to_string(v) + ")");
}

std::unique_ptr<Kernel> embedding(const OpView& op, size_t&) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const int64_t v = c.in(0).dims[0], d = c.in(0).dims[1];
  const int64_t n = numel(c.in(1).dims);
  const size_t row = size_t(d) * dtype_size(dt);
  const int64_t start = c.int_attr("vocab_start");
  const std::string where = c.where();
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    const char* table = static_cast<const char*>(in[0]);
    const int32_t* idx = static_cast<const int32_t*>(in[1]);
    check_indices(idx, n, v, start, where);
    char* o = static_cast<char*>(out[0]);
    const int64_t shift = start >= 0 ? start : 0;
#pragma omp parallel for schedule(static) if (n * d > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = int64_t(idx[i]) - shift;
      if (r >= 0 && r < v)
        std::memcpy(o + size_t(i) * row, table + size_t(r) * row, row);
      else
        std::memset(o + size_t(i) * row, 0, row);
    }
  });
}

std::unique_ptr<Kernel> embedding_grad(const OpView& op, size_t&) {
  Check c(op);
  c.primary_dtype(0, kF32);
  const int64_t v = c.out(0).dims[0], d = c.out(0).dims[1];
  const int64_t pad = c.int_attr("padding_idx");  // below V (the shape rule)
  const int64_t n = numel(c.in(1).dims);
  const int64_t start = c.int_attr("vocab_start");
  const int64_t shift = start >= 0 ? start : 0;
  const std::string where = c.where();
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    const float* dy = static_cast<const float*>(in[0]);
    const int32_t* idx = static_cast<const int32_t*>(in[1]);
    check_indices(idx, n, v, start, where);
    float* dt = static_cast<float*>(out[0]);
    // Column blocks in parallel, indices in order: deterministic sums.
    constexpr int64_t kBlock = 64;
    const int64_t blocks = (d + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n * d > kParallelGrain)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t lo = b * kBlock, hi = std::min(d, lo + kBlock);
      for (int64_t r = 0; r < v; ++r)
        for (int64_t j = lo; j < hi; ++j) dt[r * d + j] = 0.f;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = int64_t(idx[i]) - shift;
        if (r < 0 || r >= v || r == pad) continue;
        float* dst = dt + r * d;
        const float* src = dy + i * d;
#pragma omp simd
        for (int64_t j = lo; j < hi; ++j) dst[j] += src[j];
      }
    }
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("embedding", embedding);
  r.add("embedding_grad", embedding_grad);
});

}  // namespace

}  // namespace tandem::onednn
