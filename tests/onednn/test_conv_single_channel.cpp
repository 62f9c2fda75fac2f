// The weight gradient of a one-channel convolution (an image model's first
// layer), which the plugin computes itself where oneDNN's kernels are AVX2 or
// narrower (plugins/onednn/ops/conv_single_channel.hpp): against
// double-precision sums over strides, paddings, dilations and channel counts
// that are not a multiple of the register block, with and without the bias
// gradient; the same bits on 1 to 4 threads; and the kernel is the own one
// exactly where it should be.
#include <gtest/gtest.h>

#include <string>

#include "plugin_fixture.hpp"

using namespace onednn_test;

namespace {

struct Case {
  int64_t n, h, w, k, r, s;
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
};
const Case kCases[] = {
    {3, 9, 11, 10, 3, 5, 1, 1, 1, 2, 1, 1},   // 10 channels: a partial block of rows
    {2, 13, 12, 7, 3, 3, 2, 3, 0, 1, 2, 1},   // strides and a dilation
    {4, 12, 10, 16, 5, 5, 1, 1, 2, 2, 1, 1},  // the Fashion-MNIST layer's shape, smaller
    {1, 6, 7, 40, 6, 7, 1, 1, 3, 3, 1, 1},    // 42 taps: more than one 32-wide block
};

int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dilation) {
  return (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
}

// The kernel the plugin should pick: its own unless oneDNN may use AVX-512.
bool own_expected() {
  const std::string features = device_features();
  return !features.empty() && features.find("avx512") == std::string::npos;
}

}  // namespace

TEST(OnednnSingleChannelConv, WeightGradientIsTheSumOverImagesOnEveryThreadCount) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  for (const Case& c : kCases)
    for (const bool bias : {true, false}) {
      const int64_t p = out_size(c.h, c.r, c.stride_h, c.pad_h, c.dilation_h),
                    q = out_size(c.w, c.s, c.stride_w, c.pad_w, c.dilation_w);
      const tc::HostTensor dy = values({c.n, c.k, p, q}, 1), x = values({c.n, 1, c.h, c.w}, 2);
      tc::Attrs attrs;
      attrs.ints("stride", {c.stride_h, c.stride_w})
          .ints("padding", {c.pad_h, c.pad_w})
          .ints("dilation", {c.dilation_h, c.dilation_w})
          .integer("has_bias", bias);
      std::vector<tc::TensorShape> outs = {{TDM_F32, {c.k, 1, c.r, c.s}}};
      if (bias) outs.push_back({TDM_F32, {c.k}});
      const std::string name = "k=" + std::to_string(c.k) + " " + std::to_string(c.r) + "x" +
                               std::to_string(c.s) + (bias ? " with bias" : "");
      tc::RunResult first;
      for (int threads = 1; threads <= 4; ++threads) {
        ThreadCount use(threads);
        tc::RunResult r = tc::run_op(*loaded().kit, "conv2d_grad_weight", attrs, {dy, x}, outs);
        ASSERT_TRUE(r.outcome.ok()) << name << ": " << r.outcome.message;
        EXPECT_EQ(r.implementation.find("own:conv2d_grad_weight") != std::string::npos, own_expected())
            << name << " ran on " << r.implementation;
        if (threads == 1) {
          first = std::move(r);
          continue;
        }
        for (size_t i = 0; own_expected() && i < r.outputs.size(); ++i)
          EXPECT_TRUE(r.outputs[i].bitwise_equal(first.outputs[i]))
              << name << " output " << i << " differs between 1 and " << threads << " threads";
      }
      const std::vector<double> dyv = dy.to_f64(), xv = x.to_f64(), dw = first.outputs[0].to_f64();
      for (int64_t k = 0; k < c.k; ++k) {
        double db = 0;
        for (int64_t i = 0; i < c.n; ++i)
          for (int64_t e = 0; e < p * q; ++e) db += dyv[size_t((i * c.k + k) * p * q + e)];
        if (bias) {
          EXPECT_NEAR(first.outputs[1].to_f64()[size_t(k)], db, 1e-4) << name << " db " << k;
        }
        for (int64_t r = 0; r < c.r; ++r)
          for (int64_t s = 0; s < c.s; ++s) {
            double want = 0;
            for (int64_t i = 0; i < c.n; ++i)
              for (int64_t oh = 0; oh < p; ++oh)
                for (int64_t ow = 0; ow < q; ++ow) {
                  const int64_t ih = oh * c.stride_h - c.pad_h + r * c.dilation_h,
                                iw = ow * c.stride_w - c.pad_w + s * c.dilation_w;
                  if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                  want +=
                      dyv[size_t(((i * c.k + k) * p + oh) * q + ow)] * xv[size_t((i * c.h + ih) * c.w + iw)];
                }
            ASSERT_NEAR(dw[size_t((k * c.r + r) * c.s + s)], want, 1e-4)
                << name << " dw[" << k << ", " << r << ", " << s << "]";
          }
      }
    }
}
