// Gradient checks: linear (with each fused activation), matmul (with
// transposes), conv2d (stride, padding, dilation, groups).
#include "gradcheck.hpp"

namespace gradcheck {

TEST_F(Grad, LinearWithEachActivation) {
  const int64_t N = 3, I = 4, O = 5;
  for (const std::string act : {"none", "relu", "tanh", "sigmoid"})
    for (int bias = 0; bias < 2; ++bias) {
      SCOPED_TRACE(act + (bias ? " with bias" : " without bias"));
      Forward f{"linear",
                Attrs().string("activation", act),
                {random({N, I}), random({O, I}), bias ? random({O}) : HostTensor()},
                {{F64, {N, O}}},
                {}};
      draw_cotangents(f, {0});
      const HostTensor& r = f.cotangents[0];
      const HostTensor y = run1("linear", f.attrs, f.inputs, f.outputs[0]);
      // The activation's gradient from y: relu_grad's sign test reads the
      // same on y as on the pre-activation; tanh/sigmoid_grad take y.
      const HostTensor dz = act == "none" ? r : run1(act + "_grad", {}, {r, y}, {F64, {N, O}});
      const HostTensor dx = run1("linear_grad_input", {}, {dz, f.inputs[1]}, {F64, {N, I}});
      const auto dw = run("linear_grad_weight", Attrs().integer("has_bias", bias), {dz, f.inputs[0]},
                          {{F64, {O, I}}, bias ? TensorShape(F64, {O}) : TensorShape(TDM_DTYPE_INVALID, {})});
      check(f, 0, dx, "dx");
      check(f, 1, dw[0], "dw");
      if (bias) check(f, 2, dw[1], "dbias");
    }
}

// y = A'·B' with A' = ta ? aᵀ : a and B' = tb ? bᵀ : b. The gradients are
// matmuls again: dA' = dy·B'ᵀ and dB' = A'ᵀ·dy, transposed back when the
// operand was transposed.
TEST_F(Grad, MatmulWithTransposes) {
  const int64_t M = 3, K = 4, N = 2;
  for (const Dims& batch : {Dims{}, Dims{2}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        SCOPED_TRACE("batch " + std::to_string(batch.size()) + " ta " + std::to_string(ta) + " tb " +
                     std::to_string(tb));
        auto with = [&](Dims tail) {
          Dims d = batch;
          d.insert(d.end(), tail.begin(), tail.end());
          return d;
        };
        const Dims a_dims = with(ta ? Dims{K, M} : Dims{M, K}), b_dims = with(tb ? Dims{N, K} : Dims{K, N});
        auto mm = [](const HostTensor& x, const HostTensor& y, int t1, int t2, const Dims& out) {
          return run1("matmul", Attrs().integer("transpose_a", t1).integer("transpose_b", t2), {x, y},
                      {F64, out});
        };
        Forward f{"matmul",
                  Attrs().integer("transpose_a", ta).integer("transpose_b", tb),
                  {random(a_dims), random(b_dims)},
                  {{F64, with({M, N})}},
                  {}};
        draw_cotangents(f, {0});
        const HostTensor &a = f.inputs[0], &b = f.inputs[1], &r = f.cotangents[0];
        const HostTensor da = ta ? mm(b, r, tb, 1, a_dims) : mm(r, b, 0, !tb, a_dims);
        const HostTensor db = tb ? mm(r, a, 1, ta, b_dims) : mm(a, r, !ta, 0, b_dims);
        check(f, 0, da, "da");
        check(f, 1, db, "db");
      }
}

TEST_F(Grad, Conv2d) {
  struct C {
    int64_t n, c, h, w, k, r, s;
    Dims stride, pad, dil;
    int64_t groups;
  };
  const C configs[] = {
      {2, 4, 7, 6, 4, 3, 3, {2, 2}, {1, 1}, {1, 1}, 2},  // stride 2, padding, groups 2
      {1, 2, 8, 7, 3, 2, 3, {1, 1}, {1, 2}, {2, 2}, 1},  // dilation 2, asymmetric padding
      {1, 3, 5, 5, 2, 3, 3, {1, 2}, {0, 1}, {1, 1}, 1},  // mixed strides
  };
  for (const C& g : configs)
    for (int bias = 0; bias < 2; ++bias) {
      const int64_t p = (g.h + 2 * g.pad[0] - g.dil[0] * (g.r - 1) - 1) / g.stride[0] + 1;
      const int64_t q = (g.w + 2 * g.pad[1] - g.dil[1] * (g.s - 1) - 1) / g.stride[1] + 1;
      const Dims x{g.n, g.c, g.h, g.w}, w{g.k, g.c / g.groups, g.r, g.s}, y{g.n, g.k, p, q};
      Attrs a;
      a.ints("stride", g.stride).ints("padding", g.pad).ints("dilation", g.dil).integer("groups", g.groups);
      SCOPED_TRACE(a.str() + (bias ? " bias" : ""));
      Forward f{"conv2d", a, {random(x), random(w), bias ? random({g.k}) : HostTensor()}, {{F64, y}}, {}};
      draw_cotangents(f, {0});
      const HostTensor& r = f.cotangents[0];
      const HostTensor dx = run1("conv2d_grad_input", a, {r, f.inputs[1]}, {F64, x});
      Attrs wa = a;
      wa.integer("has_bias", bias);
      const auto dw = run("conv2d_grad_weight", wa, {r, f.inputs[0]},
                          {{F64, w}, bias ? TensorShape(F64, {g.k}) : TensorShape(TDM_DTYPE_INVALID, {})});
      check(f, 0, dx, "dx");
      check(f, 1, dw[0], "dw");
      if (bias) check(f, 2, dw[1], "dbias");
    }
}

}  // namespace gradcheck
