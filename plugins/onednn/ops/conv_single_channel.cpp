// oneDNN backend — the single-channel convolution's weight gradient
// (conv_single_channel.hpp).
#include "conv_single_channel.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "attention_tiles.hpp"

namespace tandem::onednn {

namespace {

// An image's taps are rows of r·s values padded to whole 32-float blocks,
// so every product runs on full vector blocks at any level (the tiles'
// column tail is scalar); the padding columns stay zero, except the one
// after the taps when the bias gradient is asked for: it holds 1, so the
// same product sums dy over the pixels (db), in the same order whatever
// dy's layout.
constexpr int64_t kBlock = 32;

int64_t tap_stride(const SingleChannelConv& g) {
  return (g.r * g.s + (g.bias ? 1 : 0) + kBlock - 1) / kBlock * kBlock;
}

// The image with its zero border: taps are then plain loads.
int64_t padded_h(const SingleChannelConv& g) {
  return g.h + 2 * g.pad_h;
}
int64_t padded_w(const SingleChannelConv& g) {
  return g.w + 2 * g.pad_w;
}

// One thread's floats: the taps of one image (p·q rows), the sums of up to
// k channels and the bordered image, rounded to whole cache lines.
size_t per_thread_floats(const SingleChannelConv& g) {
  return size_t((g.p * g.q + g.k) * tap_stride(g) + padded_h(g) * padded_w(g) + 15) / 16 * 16;
}

// taps[pixel, r·S + s] = x[tap (r, s) of pixel] from the bordered image
// (whose border stays zero: only the inside is written).
void gather_taps(const SingleChannelConv& g, const float* image, float* bordered, float* taps) {
  const int64_t ld = tap_stride(g), wp = padded_w(g);
  for (int64_t ih = 0; ih < g.h; ++ih)
    std::copy(image + ih * g.w, image + (ih + 1) * g.w, bordered + (ih + g.pad_h) * wp + g.pad_w);
  for (int64_t oh = 0; oh < g.p; ++oh)
    for (int64_t ow = 0; ow < g.q; ++ow) {
      const float* corner = bordered + oh * g.stride_h * wp + ow * g.stride_w;
      float* row = taps + (oh * g.q + ow) * ld;
      for (int64_t r = 0; r < g.r; ++r)
        for (int64_t s = 0; s < g.s; ++s) row[r * g.s + s] = corner[r * g.dilation_h * wp + s * g.dilation_w];
    }
}

}  // namespace

size_t single_channel_weight_grad_workspace(const SingleChannelConv& g, int threads) {
  return size_t(std::max(threads, 1)) * per_thread_floats(g) * sizeof(float) + 64;
}

void single_channel_weight_grad(const SingleChannelConv& g, const float* dy, const float* x, float* dw,
                                float* db, void* workspace, int threads) {
  const int64_t ld = tap_stride(g), pixels = g.p * g.q, taps = g.r * g.s;
  auto* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(workspace) + 63) / 64 * 64);
  const size_t each = per_thread_floats(g);
  // Channels go to threads in whole blocks of the dy layout (1 when plain).
  const int64_t block = std::max<int64_t>(g.dy_block, 1), blocks = g.k / block;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const int t = omp_get_thread_num(), team = omp_get_num_threads();
    const int64_t k0 = blocks * t / team * block, k1 = blocks * (t + 1) / team * block, rows = k1 - k0;
    float* tap_rows = base + size_t(t) * each;
    float* sums = tap_rows + pixels * ld;
    float* bordered = sums + g.k * ld;
    if (rows > 0) {
      std::fill(tap_rows, tap_rows + pixels * ld, 0.f);  // the padding columns, once
      if (g.bias)
        for (int64_t e = 0; e < pixels; ++e) tap_rows[e * ld + taps] = 1.f;
      std::fill(sums, sums + rows * ld, 0.f);
      std::fill(bordered, bordered + padded_h(g) * padded_w(g), 0.f);
      for (int64_t i = 0; i < g.n; ++i) {
        gather_taps(g, x + i * g.h * g.w, bordered, tap_rows);
        // sums[rows x ld] += dy[i, k0:k1] [rows x pixels] · taps [pixels x ld]; in nChw<B>c a block's
        // channel j, pixel e is at e·B + j: the block stored transposed.
        if (g.dy_block == 0)
          tiles::gemm(rows, ld, pixels, dy + (i * g.k + k0) * pixels, pixels, tap_rows, ld, sums, ld, true);
        else
          for (int64_t c = k0; c < k1; c += block)
            tiles::gemm_tn(block, ld, pixels, dy + (i * g.k + c) * pixels, block, tap_rows, ld,
                           sums + (c - k0) * ld, ld, true);
      }
      for (int64_t j = 0; j < rows; ++j) std::copy(sums + j * ld, sums + j * ld + taps, dw + (k0 + j) * taps);
      if (g.bias)
        for (int64_t j = 0; j < rows; ++j) db[k0 + j] = sums[j * ld + taps];
    }
  }
}

}  // namespace tandem::onednn
