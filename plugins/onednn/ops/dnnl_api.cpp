// oneDNN backend — the calls whose spelling changed between oneDNN 2 and 3
// (dnnl_api.hpp).
#include "dnnl_api.hpp"

#include <utility>

#include "common.hpp"
#include "oneapi/dnnl/dnnl_version.h"

#if DNNL_VERSION_MAJOR >= 3
#include <cstring>
#define TANDEM_ONEDNN_3 1
#else
#define TANDEM_ONEDNN_3 0
#endif

namespace tandem::onednn {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::primitive_attr;
using dnnl::prop_kind;

memory::dims dims_of(const memory::desc& md) {
#if TANDEM_ONEDNN_3
  return md.get_dims();
#else
  return md.dims();
#endif
}

memory::data_type data_type_of(const memory::desc& md) {
#if TANDEM_ONEDNN_3
  return md.get_data_type();
#else
  return md.data_type();
#endif
}

void append_eltwise(dnnl::post_ops& post, algorithm algo, float alpha, float beta) {
#if TANDEM_ONEDNN_3
  post.append_eltwise(algo, alpha, beta);
#else
  post.append_eltwise(1.f, algo, alpha, beta);
#endif
}

dnnl::matmul::primitive_desc matmul_pd(const memory::desc& src, const memory::desc& weights,
                                       const memory::desc* bias, const memory::desc& dst,
                                       const primitive_attr& attr) {
#if TANDEM_ONEDNN_3
  if (bias) return {engine(), src, weights, *bias, dst, attr};
  return {engine(), src, weights, dst, attr};
#else
  const auto d = bias ? dnnl::matmul::desc(src, weights, *bias, dst) : dnnl::matmul::desc(src, weights, dst);
  return {d, attr, engine()};
#endif
}

dnnl::eltwise_forward::primitive_desc eltwise_forward_pd(prop_kind kind, algorithm algo,
                                                         const memory::desc& md, float alpha, float beta,
                                                         const primitive_attr& attr) {
#if TANDEM_ONEDNN_3
  return {engine(), kind, algo, md, md, alpha, beta, attr};
#else
  return {dnnl::eltwise_forward::desc(kind, algo, md, alpha, beta), attr, engine()};
#endif
}

dnnl::eltwise_backward::primitive_desc eltwise_backward_pd(algorithm algo, const memory::desc& md,
                                                           float alpha, float beta,
                                                           const dnnl::eltwise_forward::primitive_desc& hint,
                                                           const primitive_attr& attr) {
#if TANDEM_ONEDNN_3
  return {engine(), algo, md, md, md, alpha, beta, hint, attr};
#else
  return {dnnl::eltwise_backward::desc(algo, md, md, alpha, beta), attr, engine(), hint};
#endif
}

dnnl::convolution_forward::primitive_desc convolution_forward_pd(prop_kind kind, const ConvDescs& d,
                                                                 const primitive_attr& attr) {
  const algorithm direct = algorithm::convolution_direct;
#if TANDEM_ONEDNN_3
  if (d.bias)
    return {engine(), kind,      direct,    d.src,   d.weights, *d.bias,
            d.dst,    d.strides, d.dilates, d.pad_l, d.pad_r,   attr};
  return {engine(), kind, direct, d.src, d.weights, d.dst, d.strides, d.dilates, d.pad_l, d.pad_r, attr};
#else
  const auto desc = d.bias ? dnnl::convolution_forward::desc(kind, direct, d.src, d.weights, *d.bias, d.dst,
                                                             d.strides, d.dilates, d.pad_l, d.pad_r)
                           : dnnl::convolution_forward::desc(kind, direct, d.src, d.weights, d.dst, d.strides,
                                                             d.dilates, d.pad_l, d.pad_r);
  return {desc, attr, engine()};
#endif
}

dnnl::convolution_backward_data::primitive_desc convolution_backward_data_pd(
    const ConvDescs& d, const dnnl::convolution_forward::primitive_desc& hint, const primitive_attr& attr) {
  const algorithm direct = algorithm::convolution_direct;
#if TANDEM_ONEDNN_3
  return {engine(), direct, d.src, d.weights, d.dst, d.strides, d.dilates, d.pad_l, d.pad_r, hint, attr};
#else
  return {dnnl::convolution_backward_data::desc(direct, d.src, d.weights, d.dst, d.strides, d.dilates,
                                                d.pad_l, d.pad_r),
          attr, engine(), hint};
#endif
}

dnnl::convolution_backward_weights::primitive_desc convolution_backward_weights_pd(
    const ConvDescs& d, const dnnl::convolution_forward::primitive_desc& hint, const primitive_attr& attr) {
  const algorithm direct = algorithm::convolution_direct;
#if TANDEM_ONEDNN_3
  if (d.bias)
    return {engine(),  direct,    d.src,   d.weights, *d.bias, d.dst,
            d.strides, d.dilates, d.pad_l, d.pad_r,   hint,    attr};
  return {engine(), direct, d.src, d.weights, d.dst, d.strides, d.dilates, d.pad_l, d.pad_r, hint, attr};
#else
  const auto desc = d.bias
                        ? dnnl::convolution_backward_weights::desc(direct, d.src, d.weights, *d.bias, d.dst,
                                                                   d.strides, d.dilates, d.pad_l, d.pad_r)
                        : dnnl::convolution_backward_weights::desc(direct, d.src, d.weights, d.dst, d.strides,
                                                                   d.dilates, d.pad_l, d.pad_r);
  return {desc, attr, engine(), hint};
#endif
}

dnnl::pooling_forward::primitive_desc pooling_forward_pd(prop_kind kind, algorithm algo, const PoolDescs& d,
                                                         const primitive_attr& attr) {
#if TANDEM_ONEDNN_3
  const memory::dims no_dilation(d.kernel.size(), 0);
  return {engine(), kind, algo, d.src, d.dst, d.strides, d.kernel, no_dilation, d.pad_l, d.pad_r, attr};
#else
  return {dnnl::pooling_forward::desc(kind, algo, d.src, d.dst, d.strides, d.kernel, d.pad_l, d.pad_r), attr,
          engine()};
#endif
}

dnnl::pooling_backward::primitive_desc pooling_backward_pd(algorithm algo, const PoolDescs& d,
                                                           const dnnl::pooling_forward::primitive_desc& hint,
                                                           const primitive_attr& attr) {
#if TANDEM_ONEDNN_3
  const memory::dims no_dilation(d.kernel.size(), 0);
  return {engine(), algo, d.src, d.dst, d.strides, d.kernel, no_dilation, d.pad_l, d.pad_r, hint, attr};
#else
  return {dnnl::pooling_backward::desc(algo, d.src, d.dst, d.strides, d.kernel, d.pad_l, d.pad_r), attr,
          engine(), hint};
#endif
}

dnnl::binary::primitive_desc binary_pd(algorithm algo, const memory::desc& src0, const memory::desc& src1,
                                       const memory::desc& dst, const primitive_attr& attr) {
#if TANDEM_ONEDNN_3
  return {engine(), algo, src0, src1, dst, attr};
#else
  return {dnnl::binary::desc(algo, src0, src1, dst), attr, engine()};
#endif
}

dnnl::reduction::primitive_desc reduction_pd(algorithm algo, const memory::desc& src, const memory::desc& dst,
                                             const primitive_attr& attr) {
#if TANDEM_ONEDNN_3
  return {engine(), algo, src, dst, 0.f, 0.f, attr};
#else
  return {dnnl::reduction::desc(algo, src, dst, 0.f, 0.f), attr, engine()};
#endif
}

#if !TANDEM_ONEDNN_3
namespace {

// oneDNN 2's softmax and logsoftmax: two primitive families with the same
// calls.
template <class Forward>
void add_forward_v2(PrimKernel& k, const memory::desc& md, int axis, std::unordered_map<int, memory> args) {
  k.add<Forward>(
      typename Forward::primitive_desc(typename Forward::desc(prop_kind::forward_inference, md, axis),
                                       user_scratchpad_attr(), engine()),
      std::move(args));
}

template <class Forward, class Backward>
void add_backward_v2(PrimKernel& k, const memory::desc& md, int axis, std::unordered_map<int, memory> args) {
  const typename Forward::primitive_desc hint(typename Forward::desc(prop_kind::forward_training, md, axis),
                                              engine());
  k.add<Backward>(typename Backward::primitive_desc(typename Backward::desc(md, md, axis),
                                                    user_scratchpad_attr(), engine(), hint),
                  std::move(args));
}

}  // namespace
#endif

void add_softmax_forward(PrimKernel& k, bool log, const memory::desc& md, int axis,
                         std::unordered_map<int, memory> args) {
#if TANDEM_ONEDNN_3
  const algorithm algo = log ? algorithm::softmax_log : algorithm::softmax_accurate;
  k.add<dnnl::softmax_forward>(
      dnnl::softmax_forward::primitive_desc(engine(), prop_kind::forward_inference, algo, md, md, axis,
                                            user_scratchpad_attr()),
      std::move(args));
#else
  if (log)
    add_forward_v2<dnnl::logsoftmax_forward>(k, md, axis, std::move(args));
  else
    add_forward_v2<dnnl::softmax_forward>(k, md, axis, std::move(args));
#endif
}

void add_softmax_backward(PrimKernel& k, bool log, const memory::desc& md, int axis,
                          std::unordered_map<int, memory> args) {
#if TANDEM_ONEDNN_3
  const algorithm algo = log ? algorithm::softmax_log : algorithm::softmax_accurate;
  const dnnl::softmax_forward::primitive_desc hint(engine(), prop_kind::forward_training, algo, md, md, axis);
  k.add<dnnl::softmax_backward>(
      dnnl::softmax_backward::primitive_desc(engine(), algo, md, md, md, axis, hint, user_scratchpad_attr()),
      std::move(args));
#else
  if (log)
    add_backward_v2<dnnl::logsoftmax_forward, dnnl::logsoftmax_backward>(k, md, axis, std::move(args));
  else
    add_backward_v2<dnnl::softmax_forward, dnnl::softmax_backward>(k, md, axis, std::move(args));
#endif
}

Int8Constants::Int8Constants(std::vector<float> m, int32_t src_zero_point, int weights_mask)
    : m_(std::move(m)), zero_point_(src_zero_point), weights_mask_(weights_mask) {}

void Int8Constants::set(primitive_attr& attr) const {
  const bool per_channel = m_.size() != 1;
#if TANDEM_ONEDNN_3
  attr.set_scales_mask(DNNL_ARG_WEIGHTS, per_channel ? weights_mask_ : 0);
  if (zero_point_ != 0) attr.set_zero_points_mask(DNNL_ARG_SRC, 0);
#else
  // The output scales' mask counts the destination's dimensions, whose
  // channel is dimension 1 for a matmul [B, N] and a convolution NCHW alike.
  attr.set_output_scales(per_channel ? 1 << 1 : 0, m_);
  if (zero_point_ != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {zero_point_});
#endif
}

void Int8Constants::add_args(std::unordered_map<int, memory>& args) const {
#if TANDEM_ONEDNN_3
  // Memories that own their buffers, filled once: a launch binds nothing new.
  const memory scales(memory::desc({memory::dim(m_.size())}, memory::data_type::f32, memory::format_tag::a),
                      engine());
  std::memcpy(scales.get_data_handle(), m_.data(), m_.size() * sizeof(float));
  args[DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS] = scales;
  if (zero_point_ != 0) {
    const memory zero_point(memory::desc({1}, memory::data_type::s32, memory::format_tag::a), engine());
    std::memcpy(zero_point.get_data_handle(), &zero_point_, sizeof(zero_point_));
    args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = zero_point;
  }
#else
  (void)args;
#endif
}

}  // namespace tandem::onednn
