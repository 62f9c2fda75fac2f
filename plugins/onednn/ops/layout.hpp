// oneDNN backend — the native layout (ABI 1.3, backend.h kernel_layouts) and
// the reorders at the edges of a layout.
//
// Native layout: nChw<B>c (oneDNN's aBcd<B>b) for a rank-4 f32 tensor whose C
// is a multiple of B, where B is the channel block oneDNN's own convolution
// picks on this CPU: 16 with AVX-512, 8 with AVX2 (asked once, so it follows
// ONEDNN_MAX_CPU_ISA). The direct jit convolutions read and write it, so a
// chain conv -> relu -> max-pool -> conv keeps its activations there and
// only the chain's edges reorder. B is fixed for the life of the process,
// so native bytes stay a pure function of (dtype, dims). Why C % B == 0
// only: no padded channels, so native bytes equal plain bytes and the
// eltwise and pooling kernels never meet the padding (which oneDNN requires
// to stay zero). Why f32 only: bf16 direct convolutions need
// avx512_core_bf16, not every AVX-512 CPU has it, and the gain was only
// measured for f32. TANDEM_ONEDNN_NATIVE_LAYOUTS=0 in the environment turns
// native layouts off (all plain, as with ABI 1.2), for A/B measurements.
#ifndef TANDEM_ONEDNN_OPS_LAYOUT_HPP
#define TANDEM_ONEDNN_OPS_LAYOUT_HPP

#include "common.hpp"

namespace tandem::onednn {

// The channel block B of the native layout on this CPU: 16, 8, or 0 when
// native layouts are off (disabled, or oneDNN's convolution prefers neither).
int native_block();
// Whether `t` may be native at all (see above).
bool native_eligible(const TensorShape& t);
// nChw<B>c when `native`, else dense row-major.
dnnl::memory::desc layout_md(const TensorShape& t, bool native);

// Input i of the op in layout `want_native`: its own slot when it already is,
// else a workspace copy filled by a reorder step added to `k` now.
Slot input_in_layout(PrimKernel& k, const Check& c, size_t i, bool want_native);

// A tensor a primitive reads: the tensor itself when the primitive chose its
// layout (`user`), else a workspace copy filled by a reorder step added now.
dnnl::memory staged_in(PrimKernel& k, const dnnl::memory::desc& user, const dnnl::memory::desc& chosen,
                       Slot slot);
// A tensor a primitive writes: the tensor itself, or a workspace buffer in
// the chosen layout that staged_out_finish reorders into the tensor (call it
// after adding the primitive's step).
struct StagedOut {
  dnnl::memory user, chosen;
  bool staged() const { return user != chosen; }
};
StagedOut staged_out(PrimKernel& k, const dnnl::memory::desc& user, const dnnl::memory::desc& chosen,
                     Slot slot);
void staged_out_finish(PrimKernel& k, const StagedOut& o);

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_OPS_LAYOUT_HPP
