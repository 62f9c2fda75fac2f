// CUDA backend — which GPUs this build of the plugin can run on, in plain
// C++ (no CUDA header) so the rule is unit-tested without a GPU.
#ifndef TANDEM_CUDA_GPU_SUPPORT_HPP
#define TANDEM_CUDA_GPU_SUPPORT_HPP

#include <string>

namespace tandem::cuda {

// Why GPU `index` (`name`, compute capability major.minor) cannot run this
// plugin's kernels, built for `architectures` (CMake's list, e.g.
// "75-real,...,120-virtual") whose oldest is `min_arch` (e.g. 75; 0: not
// known, nothing refused); empty when it can. A GPU newer than every
// architecture runs the PTX the build includes, compiled by the driver.
std::string unsupported_gpu_reason(int index, const std::string& name, int major, int minor, int min_arch,
                                   const std::string& architectures);

}  // namespace tandem::cuda

#endif
