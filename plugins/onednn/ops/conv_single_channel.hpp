// oneDNN backend — the weight gradient of a convolution whose input has one
// channel (an image model's first layer: grey pixels in), as im2col and
// small matrix products (attention_tiles.hpp's, compiled per vector level).
//
// Why: oneDNN 2.6's jit:avx2 backward-weights kernel computes the
// Fashion-MNIST CNN's first layer (batch 64, 1 -> 32 channels, 5 x 5 over
// 28 x 28: 40 M multiply-adds) at about 8 GFLOP/s on a Zen 3, 10-13 ms of a
// 67 ms training step (`tandem bench bench/models/cnn.toml --threads 1
// --profile`, ONEDNN_VERBOSE): slower per multiply-add than the 16 times
// larger second layer. Here dw[k, r·S + s] = Σ_n Σ_pixels dy[n, k, pixel] ·
// x[n, 0, tap (r, s) of pixel], one image at a time: 2.8-3.6 ms for that
// layer on 1 thread (taps 1.3, products 1.6), and the CNN's step went from
// 67 to 61 ms.
//
// Each thread owns a range of output channels and sums every image in
// order, so the result is the same bits for any thread count.
#ifndef TANDEM_ONEDNN_OPS_CONV_SINGLE_CHANNEL_HPP
#define TANDEM_ONEDNN_OPS_CONV_SINGLE_CHANNEL_HPP

#include <cstddef>
#include <cstdint>

namespace tandem::onednn {

// x [n, 1, h, w], dy [n, k, p, q], dw [k, 1, r, s], db [k] (when bias).
// dy_block: 0 when dy is plain NCHW, else B of its native layout nChw<B>c
// (layout.hpp; k is then a multiple of B), as the ReLU before it leaves it.
struct SingleChannelConv {
  int64_t n = 0, h = 0, w = 0, k = 0, r = 0, s = 0, p = 0, q = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  int64_t dy_block = 0;
  bool bias = false;
};

// The scratch of `threads` threads: each an image's taps and its channels' sums.
size_t single_channel_weight_grad_workspace(const SingleChannelConv& g, int threads);

// dw (and db) from dy and x, f32, x plain NCHW, dw plain OIHW; `threads` as asked of the workspace.
void single_channel_weight_grad(const SingleChannelConv& g, const float* dy, const float* x, float* dw,
                                float* db, void* workspace, int threads);

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_OPS_CONV_SINGLE_CHANNEL_HPP
