// CUDA backend — the deterministic column sums of math/column_sum.hpp as
// kernels, shared by layer_norm.cu, rms_norm.cu and activation.cu (the
// dbias of linear and conv2d) and by the kernel benchmark
// (bench/gpu_kernels.cu). The launchers take the f32 scratch that prepare
// declared as the kernel's workspace: launch never allocates.
#ifndef TANDEM_CUDA_OPS_COLUMN_SUM_CUH
#define TANDEM_CUDA_OPS_COLUMN_SUM_CUH

#include "math/column_sum.hpp"
#include "ops/kernels.cuh"

namespace tandem::cuda {

// Stage 1: block (tile, chunk) writes partials[s][chunk][j] for the
// kColumnTile columns of its tile. Tiles beyond the grid's x limit are
// taken in turn by the same blocks.
template <int K, class Term>
__global__ void __launch_bounds__(math::kColumnSumThreads)
    column_partials_kernel(math::ColumnSumPlan p, Term term, float* partials) {
  __shared__ float lanes[K][math::kRowLanes][math::kColumnTile];
  const int64_t chunk = blockIdx.y;
  for (int64_t tile = blockIdx.x; tile < p.tiles(); tile += gridDim.x) {
    const int64_t j = tile * math::kColumnTile + threadIdx.x;
    float acc[K];
    if (j < p.cols)
      math::lane_sums<K>(p, chunk, int(threadIdx.y), j, term, acc);
    else
      for (int s = 0; s < K; ++s) acc[s] = 0.0f;
    for (int s = 0; s < K; ++s) lanes[s][threadIdx.y][threadIdx.x] = acc[s];
    __syncthreads();
    if (threadIdx.y == 0 && j < p.cols)
      for (int s = 0; s < K; ++s)
        partials[(s * p.chunks + chunk) * p.cols + j] =
            math::fold(&lanes[s][0][threadIdx.x], math::kRowLanes, math::kColumnTile);
    __syncthreads();
  }
}

// K output vectors of `cols` elements.
template <class T, int K>
struct ColumnOutputs {
  T* out[K];
};

// Stage 2: out[s][j] = the fold of partials[s][0..chunks)[j]; consecutive
// threads take consecutive columns, so every chunk's row is read coalesced.
template <class T, int K>
__global__ void column_totals_kernel(math::ColumnSumPlan p, const float* partials, ColumnOutputs<T, K> out) {
  TDM_GRID_STRIDE(t, K * p.cols) {
    const int64_t s = t / p.cols, j = t % p.cols;
    st(out.out[s], j, math::fold(partials + s * p.chunks * p.cols + j, p.chunks, p.cols));
  }
}

// Bytes of f32 scratch a column sum of K sums takes.
template <int K>
inline size_t column_sum_workspace(const math::ColumnSumPlan& p) {
  return p.cols == 0 ? 0 : static_cast<size_t>(K * p.partials()) * sizeof(float);
}

// out.out[s][j] = Σ_r term_s(r, j); `scratch` holds column_sum_workspace<K>(p)
// bytes. Nothing to do without columns.
template <class T, class Term>
void launch_column_sums(const math::ColumnSumPlan& p, const Term& term, ColumnOutputs<T, Term::kSums> out,
                        void* scratch, cudaStream_t stream) {
  constexpr int K = Term::kSums;
  if (p.cols == 0) return;
  auto* partials = static_cast<float*>(scratch);
  const dim3 grid(static_cast<unsigned>(p.tiles() < kMaxGridX ? p.tiles() : kMaxGridX),
                  static_cast<unsigned>(p.chunks));
  column_partials_kernel<K, Term>
      <<<grid, dim3(math::kColumnTile, math::kRowLanes), 0, stream>>>(p, term, partials);
  column_totals_kernel<T, K><<<grid_for(K * p.cols), kThreads, 0, stream>>>(p, partials, out);
}

// Stage A of a channel sum with inner > 1: warp w sums the contiguous run
// dy[w·inner, (w + 1)·inner) as math::warp_row_sum does.
template <class T>
__global__ void run_sums_kernel(const T* dy, float* sums, int64_t runs, int64_t inner) {
  const int lane = threadIdx.x % math::kWarp;
  const int64_t first = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / math::kWarp;
  const int64_t step = int64_t(gridDim.x) * blockDim.x / math::kWarp;
  for (int64_t w = first; w < runs; w += step) {
    float v = math::warp_lane_sum(dy + w * inner, inner, lane);
    for (int o = math::kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) sums[w] = v;
  }
}

// dbias[c] = Σ_{o,i} dy[o, c, i] (math::ChannelSumPlan), with
// p.workspace_bytes() of scratch; Out is T, or float to keep the f32 sums.
template <class T, class Out>
void launch_channel_sums(const math::ChannelSumPlan& p, const T* dy, Out* dbias, void* scratch,
                         cudaStream_t stream) {
  if (p.channels == 0) return;
  auto* f = static_cast<float*>(scratch);
  if (p.inner == 1) {
    launch_column_sums(p.columns, math::PlainTerm<T>{dy, p.channels}, ColumnOutputs<Out, 1>{{dbias}}, f,
                       stream);
    return;
  }
  const int64_t runs = p.row_sums();
  if (runs > 0)
    run_sums_kernel<T><<<grid_for(runs * math::kWarp), kThreads, 0, stream>>>(dy, f, runs, p.inner);
  launch_column_sums(p.columns, math::PlainTerm<float>{f, p.channels}, ColumnOutputs<Out, 1>{{dbias}},
                     f + runs, stream);
}

}  // namespace tandem::cuda

#endif  // TANDEM_CUDA_OPS_COLUMN_SUM_CUH
