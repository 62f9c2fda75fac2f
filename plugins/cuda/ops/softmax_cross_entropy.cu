// CUDA backend — softmax_cross_entropy, its gradient and count_correct. One block per row
// of logits; f32 throughout. Row math of the loss is in math/softmax.hpp
// (tested on the CPU).
//
// Labels are not checked on the host (that would need a sync): a label
// outside [0, C) that is not ignore_index makes the loss NaN, and its
// gradient row NaN, so the error cannot pass unnoticed.
#include "math/softmax.hpp"
#include "ops/kernels.cuh"

namespace tandem::cuda {
namespace {

constexpr int kRowThreads = 256;

struct Ce {
  int64_t N, C;
  int32_t ignore;
  float eps;
  bool mean;
};

// Row statistics: max, lse = log Σ exp(x - max), Σ x.
__device__ void row_stats(const float* x, int64_t C, float* scratch, float& m, float& lse, float& total) {
  m = -INFINITY;
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x) m = fmaxf(m, x[j]);
  m = block_max(m, scratch);
  float e = 0.0f, t = 0.0f;
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x) e += expf(x[j] - m), t += x[j];
  lse = logf(block_sum(e, scratch));
  total = block_sum(t, scratch);
}

// Per-row loss (0 for ignored rows) and validity into ws[0..N) and ws[N..2N).
__global__ void ce_rows_kernel(const float* logits, const int32_t* labels, float* ws, Ce ce) {
  __shared__ float scratch[32];
  const int64_t i = blockIdx.x;
  const int32_t label = labels[i];
  const bool ignored = label == ce.ignore;
  float m, lse, total;
  row_stats(logits + i * ce.C, ce.C, scratch, m, lse, total);
  if (threadIdx.x != 0) return;
  float loss = 0.0f;
  if (!ignored)
    loss = label < 0 || label >= ce.C
               ? NAN
               : math::ce_row_loss(logits[i * ce.C + label], m, lse, total, int(ce.C), ce.eps);
  ws[i] = loss;
  ws[ce.N + i] = ignored ? 0.0f : 1.0f;
}

// Sums ws into the scalar loss (single block).
__global__ void ce_total_kernel(const float* ws, float* loss, Ce ce) {
  __shared__ float scratch[32];
  float sum = 0.0f, count = 0.0f;
  for (int64_t i = threadIdx.x; i < ce.N; i += blockDim.x) sum += ws[i], count += ws[ce.N + i];
  sum = block_sum(sum, scratch);
  count = block_sum(count, scratch);
  if (threadIdx.x == 0) *loss = ce.mean ? (count > 0.0f ? sum / count : 0.0f) : sum;
}

// Scale of every gradient row: dloss, or dloss / count for "mean".
__global__ void ce_scale_kernel(const float* dloss, const int32_t* labels, float* scale, Ce ce) {
  __shared__ float scratch[32];
  float count = 0.0f;
  for (int64_t i = threadIdx.x; i < ce.N; i += blockDim.x) count += labels[i] != ce.ignore ? 1.0f : 0.0f;
  count = block_sum(count, scratch);
  if (threadIdx.x == 0) *scale = ce.mean ? (count > 0.0f ? *dloss / count : 0.0f) : *dloss;
}

__global__ void ce_grad_kernel(const float* logits, const int32_t* labels, const float* scale, float* dlogits,
                               Ce ce) {
  __shared__ float scratch[32];
  const int64_t i = blockIdx.x;
  const int32_t label = labels[i];
  const float* x = logits + i * ce.C;
  float* dx = dlogits + i * ce.C;
  if (label == ce.ignore) {
    for (int64_t j = threadIdx.x; j < ce.C; j += blockDim.x) dx[j] = 0.0f;
    return;
  }
  float m, lse, total;
  row_stats(x, ce.C, scratch, m, lse, total);
  const bool bad = label < 0 || label >= ce.C;
  for (int64_t j = threadIdx.x; j < ce.C; j += blockDim.x)
    dx[j] = bad ? NAN : math::ce_grad(x[j], m, lse, j == label, int(ce.C), ce.eps, *scale);
}

// count_correct, stage 1: hit[i] = 1 when row i holds no NaN and its label
// is the first index of its largest value. fmaxf skips NaNs; the first
// index comes as the largest -j among the maxima (exact in f32 while
// C < 2^24, which prepare checks).
__global__ void correct_rows_kernel(const float* logits, const int32_t* labels, float* hit, int64_t C) {
  __shared__ float scratch[32];
  const int64_t i = blockIdx.x;
  const float* x = logits + i * C;
  float m = -INFINITY, nans = 0.0f;
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x) m = fmaxf(m, x[j]), nans += isnan(x[j]) ? 1.0f : 0.0f;
  m = block_max(m, scratch);
  nans = block_sum(nans, scratch);
  float first = -INFINITY;
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
    if (x[j] == m) first = fmaxf(first, -static_cast<float>(j));
  first = block_max(first, scratch);
  if (threadIdx.x == 0) hit[i] = nans == 0.0f && -first == static_cast<float>(labels[i]) ? 1.0f : 0.0f;
}

// Stage 2 (one block): the sum of the hits, exact in f32 below 2^24 rows.
__global__ void correct_total_kernel(const float* hit, float* correct, int64_t N) {
  __shared__ float scratch[32];
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) sum += hit[i];
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) *correct = sum;
}

std::unique_ptr<Kernel> prepare_count_correct(CudaDevice&, const OpView& v, size_t& workspace) {
  Check c(v);
  if (c.in(0).dtype != TDM_F32) c.unsupported("logits must be f32");
  const int64_t N = c.in(0).dims[0], C = c.in(0).dims[1];
  if (C >= (int64_t{1} << 24) || N >= (int64_t{1} << 24))
    c.unsupported("rows or classes of 2^24 or more are not implemented (f32 indices and counts)");
  decline_if(c, one_block_per_limit(N, "row"));
  workspace = static_cast<size_t>(N) * sizeof(float);
  return make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void* ws) {
    auto* hit = static_cast<float*>(ws);
    if (N > 0 && C > 0)
      correct_rows_kernel<<<unsigned(N), kRowThreads, 0, s.get()>>>(
          static_cast<const float*>(in[0]), static_cast<const int32_t*>(in[1]), hit, C);
    else if (N > 0)
      TDM_CUDA_CHECK(cudaMemsetAsync(hit, 0, static_cast<size_t>(N) * sizeof(float), s.get()));
    correct_total_kernel<<<1, 1024, 0, s.get()>>>(hit, static_cast<float*>(o[0]), N);
  });
}

// logits at `first`; the registry has checked logits [N, C] and s32 labels [N].
Ce ce_of(const Check& c, size_t first) {
  if (c.in(first).dtype != TDM_F32) c.unsupported("logits must be f32");
  Ce ce{c.in(first).dims[0], c.in(first).dims[1], 0, 0.0f, true};
  ce.mean = c.string_attr("reduction") == "mean";  // else "sum"
  ce.ignore = static_cast<int32_t>(c.int_attr("ignore_index"));
  ce.eps = static_cast<float>(c.float_attr("label_smoothing"));
  decline_if(c, one_block_per_limit(ce.N, "row"));
  return ce;
}

std::unique_ptr<Kernel> prepare_ce(CudaDevice&, const OpView& v, size_t& workspace) {
  Check c(v);
  const Ce ce = ce_of(c, 0);
  workspace = static_cast<size_t>(2 * ce.N) * sizeof(float);
  return make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void* ws) {
    auto* w = static_cast<float*>(ws);
    if (ce.N > 0)
      ce_rows_kernel<<<unsigned(ce.N), kRowThreads, 0, s.get()>>>(static_cast<const float*>(in[0]),
                                                                  static_cast<const int32_t*>(in[1]), w, ce);
    ce_total_kernel<<<1, 1024, 0, s.get()>>>(w, static_cast<float*>(o[0]), ce);
  });
}

std::unique_ptr<Kernel> prepare_ce_grad(CudaDevice&, const OpView& v, size_t& workspace) {
  Check c(v);
  const Ce ce = ce_of(c, 1);
  workspace = sizeof(float);
  return make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void* ws) {
    if (ce.N == 0) return;
    auto* scale = static_cast<float*>(ws);
    const auto* labels = static_cast<const int32_t*>(in[2]);
    ce_scale_kernel<<<1, 1024, 0, s.get()>>>(static_cast<const float*>(in[0]), labels, scale, ce);
    ce_grad_kernel<<<unsigned(ce.N), kRowThreads, 0, s.get()>>>(static_cast<const float*>(in[1]), labels,
                                                                scale, static_cast<float*>(o[0]), ce);
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("softmax_cross_entropy", prepare_ce);
  r.add("softmax_cross_entropy_grad", prepare_ce_grad);
  r.add("count_correct", prepare_count_correct);
});

}  // namespace

}  // namespace tandem::cuda
