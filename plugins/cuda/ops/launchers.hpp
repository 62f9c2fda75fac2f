// CUDA backend — own kernels that the cuBLAS/cuDNN files (compiled by g++)
// launch around the vendor call: the fused bias + activation epilogue and
// the per-channel bias gradient. Defined in ops/activation.cu.
#ifndef TANDEM_CUDA_OPS_LAUNCHERS_HPP
#define TANDEM_CUDA_OPS_LAUNCHERS_HPP

#include <cuda_runtime_api.h>

#include <cstdint>

#include "math/activation.hpp"
#include "math/column_sum.hpp"
#include "tandem/types.h"

namespace tandem::cuda {

// y[o, c, i] = act(y[o, c, i] + bias[c]) over [outer, channels, inner];
// bias may be NULL (activation only). In place, one pass.
void launch_bias_act(tdm_dtype dtype, void* y, const void* bias, int64_t outer, int64_t channels,
                     int64_t inner, math::Act act, cudaStream_t stream);

// dbias[c] = Σ_{o,i} dy[o, c, i] over [outer, channels, inner]
// (`plan` = math::channel_sum_plan(outer, channels, inner)), accumulated in
// f32 in the fixed order of math/column_sum.hpp; `scratch` holds
// plan.workspace_bytes() of the kernel's planned workspace. dbias has
// dy's dtype or f32.
void launch_channel_sum(tdm_dtype dtype, const void* dy, tdm_dtype dbias_dtype, void* dbias,
                        const math::ChannelSumPlan& plan, void* scratch, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_CUDA_OPS_LAUNCHERS_HPP
