#include "launch_limits.hpp"

namespace tandem::cuda {

std::string one_block_per_limit(int64_t count, const char* unit) {
  if (count <= kMaxGridX) return "";
  return std::to_string(count) + " " + unit + "s, one block each, exceed CUDA's grid of " +
         std::to_string(kMaxGridX) + " blocks; split the batch or place this layer on the CPU";
}

std::string int_positions_limit(int64_t count, const char* units) {
  if (count <= kMaxInt) return "";
  return std::to_string(count) + " " + units + " exceed the " + std::to_string(kMaxInt) +
         " positions the sort carries as int; split the batch or place this layer on the CPU";
}

std::string gemm_limit(int64_t M, int64_t N, int64_t K, int64_t batch) {
  const std::pair<const char*, int64_t> sizes[] = {{"M", M}, {"N", N}, {"K", K}, {"batch", batch}};
  for (const auto& [name, value] : sizes)
    if (value > kMaxInt)
      return std::string("GEMM ") + name + " = " + std::to_string(value) + " exceeds cuBLAS's int limit of " +
             std::to_string(kMaxInt) + "; split the batch or place this layer on the CPU";
  return "";
}

std::string cudnn_tensor_limit(std::initializer_list<int64_t> element_counts) {
  for (int64_t n : element_counts)
    if (n > kMaxInt)
      return "a tensor of " + std::to_string(n) + " elements exceeds the " + std::to_string(kMaxInt) +
             " that cuDNN's descriptors address; split the batch or place this layer on the CPU";
  return "";
}

}  // namespace tandem::cuda
