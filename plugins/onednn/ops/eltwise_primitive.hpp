// oneDNN backend — a dnnl::eltwise_forward over a tensor seen as one flat
// dense vector, shared by the activations (activation.cpp) and scale
// (elementwise.cpp). That view holds for the native layout too (layout.hpp:
// no padding), so the op computes in its output's layout and reorders an
// input that the host handed in the other one (only at a chain's edge).
#ifndef TANDEM_ONEDNN_OPS_ELTWISE_PRIMITIVE_HPP
#define TANDEM_ONEDNN_OPS_ELTWISE_PRIMITIVE_HPP

#include "common.hpp"

namespace tandem::onednn {

// The tensor as one dense vector.
dnnl::memory::desc flat_md(const TensorShape& t);

// y = algo(x; alpha, beta) for a one-input, one-output op (f32 or bf16);
// sets the workspace it needs.
std::unique_ptr<Kernel> eltwise_forward(const Check& c, dnnl::algorithm algo, float alpha, float beta,
                                        size_t& ws);

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_OPS_ELTWISE_PRIMITIVE_HPP
