// Gradient checks: pooling, activations, softmax, the loss, normalisation,
// embedding, dropout.
#include <cmath>

#include "gradcheck.hpp"
#include "tandem/conformance/cases.hpp"

namespace gradcheck {

TEST_F(Grad, MaxPool2d) {
  // Distinct values 1/16 apart (Fill::no_ties): a step of h ~ 1e-6 never
  // changes which element is the maximum, so L is smooth there.
  const Dims x{2, 2, 6, 5};
  for (const Dims& stride : {Dims{2, 2}, Dims{1, 1}}) {
    const Attrs a = Attrs().ints("kernel", {3, 3}).ints("stride", stride).ints("padding", {1, 1});
    const Dims y{2, 2, (6 + 2 - 3) / stride[0] + 1, (5 + 2 - 3) / stride[1] + 1};
    Forward f{"max_pool2d", a, {random(x, Fill::no_ties())}, {{F64, y}}, {}};
    draw_cotangents(f, {0});
    check(f, 0, run1("max_pool2d_grad", a, {f.cotangents[0], f.inputs[0]}, {F64, x}), "dx " + a.str());
  }
}

TEST_F(Grad, AvgPool2dBothPaddingModes) {
  const Dims x{2, 3, 7, 6};
  for (int include = 0; include < 2; ++include) {
    const Attrs a = Attrs()
                        .ints("kernel", {3, 2})
                        .ints("stride", {2, 1})
                        .ints("padding", {1, 1})
                        .integer("count_include_pad", include);
    const Dims y{2, 3, (7 + 2 - 3) / 2 + 1, (6 + 2 - 2) / 1 + 1};
    Forward f{"avg_pool2d", a, {random(x)}, {{F64, y}}, {}};
    draw_cotangents(f, {0});
    check(f, 0, run1("avg_pool2d_grad", a, {f.cotangents[0]}, {F64, x}), "dx " + a.str());
  }
}

// Every activation of the catalog, with the attribute variants the
// conformance kit uses; x kept at least 0.05 away from 0, where relu and
// leaky_relu have their kink.
TEST_F(Grad, Activations) {
  const Dims s{3, 7};
  for (const tandem::catalog::Op& op : tandem::catalog::ops()) {
    if (op.section != "activation" || op.is(TDM_OP_GRADIENT)) continue;
    const tandem::catalog::Op& grad = *tandem::catalog::find(op.grad_ops.at(0));
    const bool from_y = grad.inputs.at(1).name == "y";
    for (const Attrs& a : tandem::conformance::activation_attr_variants(op)) {
      SCOPED_TRACE(op.name + " " + a.str());
      Forward f{op.name, a, {away_from_zero(s, 0.05, 3)}, {{F64, s}}, {}};
      draw_cotangents(f, {0});
      const HostTensor y = run1(op.name, a, f.inputs, f.outputs[0]);
      check(f, 0, run1(grad.name, a, {f.cotangents[0], from_y ? y : f.inputs[0]}, {F64, s}), "dx");
    }
  }
}

TEST_F(Grad, SoftmaxAndLogSoftmax) {
  for (const char* op : {"softmax", "log_softmax"})
    for (int64_t axis : {-1, 0, 1}) {
      const Dims s{3, 5, 4};
      const Attrs a = Attrs().integer("axis", axis);
      Forward f{op, a, {random(s, Fill::range(-3, 3))}, {{F64, s}}, {}};
      draw_cotangents(f, {0});
      const HostTensor y = run1(op, a, f.inputs, f.outputs[0]);
      check(f, 0, run1(std::string(op) + "_grad", a, {f.cotangents[0], y}, {F64, s}),
            std::string(op) + " axis " + std::to_string(axis));
    }
}

TEST_F(Grad, SoftmaxCrossEntropy) {
  struct L {
    const char* reduction;
    int64_t ignore;
    double smoothing;
  };
  for (const L& l :
       {L{"mean", -100, 0}, L{"sum", -100, 0}, L{"mean", 2, 0.1}, L{"sum", 1, 0.2}, L{"mean", 0, 0.3}}) {
    const int64_t N = 7, C = 4;
    const Attrs a = Attrs()
                        .string("reduction", l.reduction)
                        .integer("ignore_index", l.ignore)
                        .number("label_smoothing", l.smoothing);
    HostTensor labels = random({N}, Fill::ints(0, C - 1), TDM_S32);
    if (l.ignore >= 0)
      labels.set(0, double(l.ignore)), labels.set(1, double((l.ignore + 1) % C));  // both kinds
    // The loss of a run in f64 is f64 (ops.md conventions).
    Forward f{"softmax_cross_entropy", a, {random({N, C}, Fill::range(-3, 3)), labels}, {{F64, {}}}, {}};
    draw_cotangents(f, {0});
    const HostTensor dlogits =
        run1("softmax_cross_entropy_grad", a, {f.cotangents[0], f.inputs[0], labels}, {F64, {N, C}});
    check(f, 0, dlogits, std::string("dlogits ") + a.str());
  }
}

TEST_F(Grad, LayerNorm) {
  for (const Dims& s : {Dims{3, 7}, Dims{2, 2, 5}}) {
    const int64_t D = s.back();
    const Dims rows(s.begin(), s.end() - 1);
    Forward f{"layer_norm",
              {},
              {random(s), random({D}, Fill::range(0.5, 1.5)), random({D})},
              {{F64, s}, {F64, rows}, {F64, rows}},
              {}};
    draw_cotangents(f, {0});  // L depends on y only: mean/rstd are saved for the backward
    const auto fwd = run("layer_norm", {}, f.inputs, f.outputs);
    const auto g = run("layer_norm_grad", {}, {f.cotangents[0], f.inputs[0], f.inputs[1], fwd[1], fwd[2]},
                       {{F64, s}, {F64, {D}}, {F64, {D}}});
    check(f, 0, g[0], "dx");
    check(f, 1, g[1], "dgamma");
    check(f, 2, g[2], "dbeta");
  }
}

TEST_F(Grad, BatchNormTrain) {
  for (const Dims& s : {Dims{4, 3, 2, 2}, Dims{5, 2}}) {
    const int64_t C = s[1];
    Forward f{"batch_norm_train",
              {},
              {random(s), random({C}, Fill::range(0.5, 1.5)), random({C}), random({C}),
               random({C}, Fill::positive())},
              {{F64, s}, {F64, {C}}, {F64, {C}}, {F64, {C}}, {F64, {C}}},
              {}};
    draw_cotangents(f, {0});
    const auto fwd = run("batch_norm_train", {}, f.inputs, f.outputs);
    const auto g = run("batch_norm_grad", {}, {f.cotangents[0], f.inputs[0], f.inputs[1], fwd[1], fwd[2]},
                       {{F64, s}, {F64, {C}}, {F64, {C}}});
    check(f, 0, g[0], "dx");
    check(f, 1, g[1], "dgamma");
    check(f, 2, g[2], "dbeta");
  }
}

TEST_F(Grad, Embedding) {
  const int64_t V = 6, D = 3;
  for (int64_t padding : {-1, 2}) {
    HostTensor idx = random({2, 4}, Fill::ints(0, V - 1), TDM_S32);
    idx.set(0, 2), idx.set(5, 2), idx.set(3, 4), idx.set(7, 4);  // repeated rows accumulate; row 2 present
    Attrs a;
    if (padding >= 0) a.integer("padding_idx", padding);
    Forward f{"embedding", a, {random({V, D}), idx}, {{F64, {2, 4, D}}}, {}};
    draw_cotangents(f, {0});
    const HostTensor dtable = run1("embedding_grad", a, {f.cotangents[0], idx}, {F64, {V, D}});
    HostTensor numeric = numeric_grad(f, 0);
    if (padding >= 0)
      for (int64_t d = 0; d < D; ++d) {
        // ops.md: the padding row is looked up like any other, but its
        // gradient is defined as 0 — so the finite difference there is not 0.
        EXPECT_EQ(dtable.get(padding * D + d), 0.0) << "dtable[padding_idx] must be zero";
        numeric.set(padding * D + d, 0.0);
      }
    expect_grad(dtable, numeric, f, "dtable " + a.str());
  }
}

// A vocabulary slice (vocab_start): rows [3, 9) of a vocabulary of 12;
// indices outside the slice read zeros and contribute no gradient.
TEST_F(Grad, EmbeddingVocabularySlice) {
  const int64_t V = 6, D = 3;
  HostTensor idx = random({2, 5}, Fill::ints(0, 11), TDM_S32);
  idx.set(0, 4), idx.set(6, 4), idx.set(1, 0), idx.set(2, 11);  // a repeated row, and both sides of the slice
  Attrs a;
  a.integer("vocab_start", 3).integer("padding_idx", 2);
  Forward f{"embedding", a, {random({V, D}), idx}, {{F64, {2, 5, D}}}, {}};
  draw_cotangents(f, {0});
  const HostTensor dtable = run1("embedding_grad", a, {f.cotangents[0], idx}, {F64, {V, D}});
  HostTensor numeric = numeric_grad(f, 0);
  for (int64_t d = 0; d < D; ++d) numeric.set(2 * D + d, 0.0);  // the padding row's gradient is defined as 0
  expect_grad(dtable, numeric, f, "dtable " + a.str());
}

TEST_F(Grad, DropoutMatchesMaskOverKeep) {
  const Dims s{4, 5};
  for (double p : {0.0, 0.3, 0.75}) {
    const Attrs a = Attrs().number("p", p).integer("seed", 1234);
    Forward f{"dropout", a, {random(s)}, {{F64, s}, {TDM_U8, s}}, {}};
    draw_cotangents(f, {0});  // fixed seed: the same mask on every evaluation
    const auto fwd = run("dropout", a, f.inputs, f.outputs);
    const HostTensor dx = run1("dropout_grad", Attrs().number("p", p), {f.cotangents[0], fwd[1]}, {F64, s});
    check(f, 0, dx, "dx p=" + std::to_string(p));
    for (int64_t i = 0; i < dx.numel(); ++i)
      EXPECT_DOUBLE_EQ(dx.get(i), fwd[1].get(i) != 0 ? f.cotangents[0].get(i) / (1 - p) : 0.0) << i;
  }
}

}  // namespace gradcheck
