// Reference backend — the geometry shared by conv2d, its gradients and
// conv2d_int8: shapes and attributes (sdk/ops.md, conv2d) resolved once, and
// the set of "taps", every (output position, filter position) pair whose
// input position lies inside the image (a padded tap reads a zero and adds
// nothing, so it is skipped).
#ifndef TANDEM_REFERENCE_OPS_CONV_GEOMETRY_HPP
#define TANDEM_REFERENCE_OPS_CONV_GEOMETRY_HPP

#include "common.hpp"

namespace tandem::reference {

struct ConvGeometry {
  int64_t N, C, H, W;  // input
  int64_t K, R, S;     // filters: w[K, C/G, R, S]
  int64_t P, Q;        // output
  int64_t G;           // groups
  int64_t sh, sw, ph, pw, dh, dw;

  Dims x() const { return {N, C, H, W}; }
  Dims w() const { return {K, C / G, R, S}; }
  Dims y() const { return {N, K, P, Q}; }

  // f(y_index, x_index, w_index) for every tap that reads a real (not
  // padded) input element.
  template <class F>
  void for_each_tap(F&& f) const {
    const int64_t Cg = C / G, Kg = K / G;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t q = 0; q < Q; ++q) {
            const int64_t yi = ((n * K + k) * P + p) * Q + q;
            const int64_t group = k / Kg;
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t r = 0; r < R; ++r)
                for (int64_t s = 0; s < S; ++s) {
                  const int64_t h = p * sh - ph + r * dh, wpos = q * sw - pw + s * dw;
                  if (h < 0 || h >= H || wpos < 0 || wpos >= W) continue;  // zero padding
                  const int64_t ci = group * Cg + c;
                  f(yi, ((n * C + ci) * H + h) * W + wpos, ((k * Cg + c) * R + r) * S + s);
                }
          }
  }
};

inline int64_t out_size(int64_t in, int64_t pad, int64_t dil, int64_t k, int64_t stride) {
  const int64_t span = in + 2 * pad - dil * (k - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;  // floor division of a non-negative span
}

// Reads attributes and the shapes known for `op`: x_dims is the image shape
// (input or, for grad_input, output), w_dims the filter shape (grad_weight:
// from its output). The shape rule of every caller (conv_output in
// tandem/op_shapes_products.hpp) has checked them: rank 4, groups dividing C
// and K, w with C/groups channels, attributes in range, a filter that fits.
inline ConvGeometry geometry(const Check& c, const Dims& x_dims, const Dims& w_dims) {
  ConvGeometry g{};
  const auto stride = c.pair_attr("stride", {1, 1}), pad = c.pair_attr("padding", {0, 0});
  const auto dil = c.pair_attr("dilation", {1, 1});
  g.G = c.int_attr("groups", 1);
  g.sh = stride[0], g.sw = stride[1], g.ph = pad[0], g.pw = pad[1], g.dh = dil[0], g.dw = dil[1];
  g.N = x_dims[0], g.C = x_dims[1], g.H = x_dims[2], g.W = x_dims[3];
  g.K = w_dims[0], g.R = w_dims[2], g.S = w_dims[3];
  g.P = out_size(g.H, g.ph, g.dh, g.R, g.sh);
  g.Q = out_size(g.W, g.pw, g.dw, g.S, g.sw);
  return g;
}

}  // namespace tandem::reference

#endif  // TANDEM_REFERENCE_OPS_CONV_GEOMETRY_HPP
