// oneDNN backend — the calls whose spelling changed between oneDNN 2 and 3,
// one function each, so that the ops read the same against either.
//
// oneDNN 3 removed the operation descriptors (a primitive descriptor is
// built from the engine and the memory descriptors directly), merged
// logsoftmax into softmax, renamed the memory descriptor's queries, dropped
// the scale of an eltwise post-op, and made int8 scales and zero points
// arguments of each execution instead of constants of the primitive. Debian
// 12 ships oneDNN 2.6 and Debian 13 oneDNN 3.7; the plugin
// builds against both, and this file is the only one that asks which.
#ifndef TANDEM_ONEDNN_OPS_DNNL_API_HPP
#define TANDEM_ONEDNN_OPS_DNNL_API_HPP

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

namespace tandem::onednn {

class PrimKernel;

dnnl::memory::dims dims_of(const dnnl::memory::desc& md);
dnnl::memory::data_type data_type_of(const dnnl::memory::desc& md);

// An eltwise post-op (relu, tanh, logistic) at scale 1.
void append_eltwise(dnnl::post_ops& post, dnnl::algorithm algo, float alpha = 0.f, float beta = 0.f);

// dst = src·weights (+ bias when `bias` is not null).
dnnl::matmul::primitive_desc matmul_pd(const dnnl::memory::desc& src, const dnnl::memory::desc& weights,
                                       const dnnl::memory::desc* bias, const dnnl::memory::desc& dst,
                                       const dnnl::primitive_attr& attr);

// Element-wise on one descriptor `md` (source, destination and their
// gradients alike).
dnnl::eltwise_forward::primitive_desc eltwise_forward_pd(dnnl::prop_kind kind, dnnl::algorithm algo,
                                                         const dnnl::memory::desc& md, float alpha,
                                                         float beta, const dnnl::primitive_attr& attr);
dnnl::eltwise_backward::primitive_desc eltwise_backward_pd(dnnl::algorithm algo, const dnnl::memory::desc& md,
                                                           float alpha, float beta,
                                                           const dnnl::eltwise_forward::primitive_desc& hint,
                                                           const dnnl::primitive_attr& attr);

// A direct convolution's descriptors and geometry (dilation counted from 0,
// as oneDNN counts it); `bias` may be null.
struct ConvDescs {
  dnnl::memory::desc src, weights, dst;
  const dnnl::memory::desc* bias = nullptr;
  dnnl::memory::dims strides, dilates, pad_l, pad_r;
};
dnnl::convolution_forward::primitive_desc convolution_forward_pd(dnnl::prop_kind kind, const ConvDescs& d,
                                                                 const dnnl::primitive_attr& attr);
dnnl::convolution_backward_data::primitive_desc convolution_backward_data_pd(
    const ConvDescs& d, const dnnl::convolution_forward::primitive_desc& hint,
    const dnnl::primitive_attr& attr);
dnnl::convolution_backward_weights::primitive_desc convolution_backward_weights_pd(
    const ConvDescs& d, const dnnl::convolution_forward::primitive_desc& hint,
    const dnnl::primitive_attr& attr);

// Pooling without dilation.
struct PoolDescs {
  dnnl::memory::desc src, dst;
  dnnl::memory::dims strides, kernel, pad_l, pad_r;
};
dnnl::pooling_forward::primitive_desc pooling_forward_pd(dnnl::prop_kind kind, dnnl::algorithm algo,
                                                         const PoolDescs& d,
                                                         const dnnl::primitive_attr& attr);
dnnl::pooling_backward::primitive_desc pooling_backward_pd(dnnl::algorithm algo, const PoolDescs& d,
                                                           const dnnl::pooling_forward::primitive_desc& hint,
                                                           const dnnl::primitive_attr& attr);

dnnl::binary::primitive_desc binary_pd(dnnl::algorithm algo, const dnnl::memory::desc& src0,
                                       const dnnl::memory::desc& src1, const dnnl::memory::desc& dst,
                                       const dnnl::primitive_attr& attr);
dnnl::reduction::primitive_desc reduction_pd(dnnl::algorithm algo, const dnnl::memory::desc& src,
                                             const dnnl::memory::desc& dst, const dnnl::primitive_attr& attr);

// Appends (log_)softmax over `axis` of `md` to k: forward reads DNNL_ARG_SRC
// and writes DNNL_ARG_DST; backward reads DNNL_ARG_DIFF_DST and DNNL_ARG_DST
// and writes DNNL_ARG_DIFF_SRC. oneDNN 2 has a primitive of its own for the
// log form.
void add_softmax_forward(PrimKernel& k, bool log, const dnnl::memory::desc& md, int axis,
                         std::unordered_map<int, dnnl::memory> args);
void add_softmax_backward(PrimKernel& k, bool log, const dnnl::memory::desc& md, int axis,
                          std::unordered_map<int, dnnl::memory> args);

// The constants of an int8 product: f32 scales m (one, or one per output
// channel) that take the s32 accumulator to f32, and the u8 source's zero
// point. oneDNN 2 keeps them in the attribute (output scales); oneDNN 3
// reads them from memory at each execution, as the weights' scales, so
// `weights_mask` names the weights' output-channel dimensions (matmul [K, N]:
// 1 << 1; convolution oihw: 1 << 0; goihw: 1 << 0 | 1 << 1).
class Int8Constants {
 public:
  Int8Constants(std::vector<float> m, int32_t src_zero_point, int weights_mask);
  void set(dnnl::primitive_attr& attr) const;
  // The arguments oneDNN 3 reads them from (none with oneDNN 2).
  void add_args(std::unordered_map<int, dnnl::memory>& args) const;

 private:
  std::vector<float> m_;
  int32_t zero_point_;
  int weights_mask_;
};

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_OPS_DNNL_API_HPP
