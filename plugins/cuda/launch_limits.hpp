// CUDA backend — the sizes its kernel launches and vendor calls can take,
// in plain C++ (no CUDA header) so every decline is unit-tested without a
// GPU. Each function returns why a size cannot run (empty: it can); a
// kernel's prepare passes that to Check::unsupported, so the host places
// the op elsewhere or reports the reason instead of an internal error at
// launch.
#ifndef TANDEM_CUDA_LAUNCH_LIMITS_HPP
#define TANDEM_CUDA_LAUNCH_LIMITS_HPP

#include <cstdint>
#include <initializer_list>
#include <string>

namespace tandem::cuda {

// CUDA's grid x dimension and the int parameters of cuBLAS and cuDNN.
constexpr int64_t kMaxGridX = INT32_MAX;
constexpr int64_t kMaxInt = INT32_MAX;

// A kernel launched with one block per `unit` ("row", "channel", ...):
// `count` blocks must fit the grid.
std::string one_block_per_limit(int64_t count, const char* unit);

// A kernel that sorts `count` items carrying each one's position as an int
// (embedding_grad): the positions must fit one. `units` is plural.
std::string int_positions_limit(int64_t count, const char* units);

// A cuBLAS GEMM of M x N x K, `batch` times: each is an int parameter.
std::string gemm_limit(int64_t M, int64_t N, int64_t K, int64_t batch);

// cuDNN's 4-d descriptors (int dimensions and strides): every tensor's
// element count, and so every dimension, must fit an int.
std::string cudnn_tensor_limit(std::initializer_list<int64_t> element_counts);

}  // namespace tandem::cuda

#endif
