// CUDA backend — embedding_grad's kernels (math/embedding_grad.hpp has the
// schedule), shared by ops/embedding.cu and the kernel benchmark
// (bench/gpu_kernels.cu): keys and positions, CUB's radix sort of the pairs
// (stable, so each row's positions stay in increasing order; its output is
// a function of its input alone), then one pass that writes every element
// of dtable once: the sum of its row's run, or zero. Every scratch array is
// in the workspace prepare declared.
#ifndef TANDEM_CUDA_OPS_EMBEDDING_GRAD_CUH
#define TANDEM_CUDA_OPS_EMBEDDING_GRAD_CUH

// NVTX ranges around CUB's calls would be the only users of NVTX here.
#ifndef CCCL_DISABLE_NVTX
#define CCCL_DISABLE_NVTX
#endif
#include <cub/device/device_radix_sort.cuh>

#include "math/embedding_grad.hpp"
#include "ops/kernels.cuh"

namespace tandem::cuda {

struct EmbeddingGradShape {
  int64_t n = 0, V = 0, D = 0;
  int64_t shift = 0;     // vocab_start, or 0 for a whole table
  int64_t padding = -1;  // in the table's own rows; < 0: none
};

__global__ void embedding_keys_kernel(const int32_t* idx, uint32_t* keys, int32_t* positions,
                                      EmbeddingGradShape e, uint32_t sentinel) {
  TDM_GRID_STRIDE(i, e.n) {
    keys[i] = math::embedding_key(idx[i], e.shift, e.V, e.padding, sentinel);
    positions[i] = static_cast<int32_t>(i);
  }
}

// A block per group of consecutive table rows, its threads along D: one
// binary search finds where the group's first row starts in the sorted
// keys, then the block walks the runs row by row, each thread summing its
// columns over a run (the dy rows of a run are read coalesced) and writing
// zeros for rows without one. Every dtable element is written once.
__global__ void embedding_rows_kernel(const float* dy, const uint32_t* keys, const int32_t* positions,
                                      float* dtable, EmbeddingGradShape e, uint32_t sentinel, int64_t group) {
  for (int64_t v0 = blockIdx.x * group; v0 < e.V; v0 += int64_t(gridDim.x) * group) {
    const int64_t v1 = v0 + group < e.V ? v0 + group : e.V;
    int64_t begin = v0 < int64_t(sentinel) ? math::key_lower_bound(keys, e.n, uint32_t(v0)) : e.n;
    for (int64_t v = v0; v < v1; ++v) {
      const int64_t end = v < int64_t(sentinel) ? math::run_end(keys, e.n, begin, uint32_t(v)) : begin;
      for (int64_t j = threadIdx.x; j < e.D; j += blockDim.x)
        dtable[v * e.D + j] = math::run_sum(positions, begin, end, dy, e.D, j);
      begin = end;
    }
  }
}

// CUB's scratch for sorting n pairs on the current device (its tuning, and
// so its size, depends on the GPU's architecture).
inline cudaError_t embedding_grad_sort_bytes(int64_t n, int key_bits, size_t& bytes) {
  bytes = 0;
  if (n == 0) return cudaSuccess;
  return cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n, 0, key_bits);
}

// dtable[V, D] from dy[n, D] and indices[n]; `workspace` is laid out as
// `layout` says (math::embedding_grad_layout with the sort's bytes).
inline cudaError_t launch_embedding_grad(const EmbeddingGradShape& e, const float* dy, const int32_t* idx,
                                         float* dtable, void* workspace,
                                         const math::EmbeddingGradLayout& layout, size_t sort_bytes,
                                         cudaStream_t stream) {
  if (e.V * e.D == 0) return cudaSuccess;
  const uint32_t sentinel = math::embedding_sentinel(e.V);
  auto* base = static_cast<char*>(workspace);
  auto* keys_in = reinterpret_cast<uint32_t*>(base + layout.keys_in);
  auto* keys_out = reinterpret_cast<uint32_t*>(base + layout.keys_out);
  auto* pos_in = reinterpret_cast<int32_t*>(base + layout.positions_in);
  auto* pos_out = reinterpret_cast<int32_t*>(base + layout.positions_out);
  if (e.n > 0) {
    embedding_keys_kernel<<<grid_for(e.n), kThreads, 0, stream>>>(idx, keys_in, pos_in, e, sentinel);
    const cudaError_t sorted =
        cub::DeviceRadixSort::SortPairs(base + layout.sort, sort_bytes, keys_in, keys_out, pos_in, pos_out,
                                        e.n, 0, math::embedding_key_bits(sentinel), stream);
    if (sorted != cudaSuccess) return sorted;
  }
  // Whole warps along D, at most a kThreads-wide block.
  const int64_t threads = std::min<int64_t>(kThreads, (e.D + 31) / 32 * 32);
  const int64_t group = math::embedding_rows_per_block(e.V);
  const int64_t blocks = std::min<int64_t>((e.V + group - 1) / group, int64_t(65535) * 8);
  embedding_rows_kernel<<<static_cast<unsigned>(blocks), static_cast<unsigned>(threads), 0, stream>>>(
      dy, keys_out, pos_out, dtable, e, sentinel, group);
  return cudaGetLastError();
}

}  // namespace tandem::cuda

#endif  // TANDEM_CUDA_OPS_EMBEDDING_GRAD_CUH
