// oneDNN backend — the matrix-product kernels shared by matmul.cpp and
// linear.cpp: dnnl::matmul plumbing, and the own GEMM where it serves.
//
// Transposes do not move data: a transposed operand is described by a memory
// descriptor whose last two strides are swapped, and oneDNN reads it in place.
// The one exception is a measured slow case of oneDNN 2.6's AVX2 sgemm, where
// matmul_kernel copies b into its transposed form first; and a measured slow
// case of its AVX-512 f32 brgemm runs on oneDNN's sgemm instead
// (matmul_primitive.cpp).
#ifndef TANDEM_ONEDNN_OPS_MATMUL_PRIMITIVE_HPP
#define TANDEM_ONEDNN_OPS_MATMUL_PRIMITIVE_HPP

#include "common.hpp"
#include "sgemm.hpp"

namespace tandem::onednn {

// [batch..., rows, cols] view of a dense tensor stored as [batch..., rows, cols]
// (transposed = false) or as [batch..., cols, rows] (transposed = true).
dnnl::memory::desc view_md(const Dims& batch, int64_t rows, int64_t cols, bool transposed, tdm_dtype dt);

// Appends y = a·b (+ bias) with attr's post-ops to `kernel`: the
// dnnl::matmul oneDNN picks, or oneDNN's sgemm where that was measured to
// be faster (matmul_primitive.cpp). `accumulate`: attr's post-ops are one
// sum, and y holds the addend when the step runs.
void add_product(PrimKernel& kernel, const dnnl::memory::desc& a, Slot sa, const dnnl::memory::desc& b,
                 Slot sb, const dnnl::memory::desc& y, Slot sy, const dnnl::memory::desc* bias, Slot sbias,
                 const dnnl::primitive_attr& attr, bool accumulate);

// A kernel of one product y = a·b (+ bias) with post-ops (add_product); sets the
// workspace its scratchpad needs. With `addend` (an input slot), y = a·b +
// addend: a sum post-op over y, which holds the addend first (copied there
// unless the launch passes it in place); `post` must then be empty.
std::unique_ptr<Kernel> matmul_kernel(std::string name, const dnnl::memory::desc& a, Slot sa,
                                      const dnnl::memory::desc& b, Slot sb, const dnnl::memory::desc& y,
                                      Slot sy, const dnnl::memory::desc* bias, Slot sbias,
                                      const dnnl::post_ops& post, size_t& workspace,
                                      const Slot* addend = nullptr);

// A kernel of the own GEMM (sgemm.hpp) for a CPU it serves: a, b and (when
// p.bias) the bias from input slots, c the output 0 and (when p.row_sums)
// a's row sums the output 1; when p.accumulate, c starts as the input at
// addend_slot (copied into c unless the launch passes it in place). Sets
// the workspace to the packing buffers of the thread count at prepare.
std::unique_ptr<Kernel> sgemm_kernel(const Check& c, const sgemm::Problem& p, size_t a_slot, size_t b_slot,
                                     size_t bias_slot, size_t& workspace, size_t addend_slot = 0);

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_OPS_MATMUL_PRIMITIVE_HPP
