// Gradient checks: the transformer ops of SDK 1.5 — rms_norm, rope,
// attention (causal or not, grouped heads, a padding mask, dropout).
#include <cmath>

#include "gradcheck.hpp"
#include "tandem/attention_layout.hpp"

namespace gradcheck {

TEST_F(Grad, RmsNorm) {
  for (const Dims& s : {Dims{3, 7}, Dims{2, 2, 5}}) {
    const int64_t D = s.back();
    const Dims rows(s.begin(), s.end() - 1);
    for (double eps : {1e-6, 0.1}) {
      const Attrs a = Attrs().number("epsilon", eps);
      Forward f{"rms_norm", a, {random(s), random({D}, Fill::range(0.5, 1.5))}, {{F64, s}, {F64, rows}}, {}};
      draw_cotangents(f, {0});
      const auto fwd = run("rms_norm", a, f.inputs, f.outputs);
      const auto g = run("rms_norm_grad", a, {f.cotangents[0], f.inputs[0], f.inputs[1], fwd[1]},
                         {{F64, s}, {F64, {D}}});
      check(f, 0, g[0], "dx " + a.str());
      check(f, 1, g[1], "dgamma " + a.str());
    }
  }
}

TEST_F(Grad, Rope) {
  const Dims s{2, 3, 5, 8};
  for (int64_t offset : {-1, 0, 700}) {
    HostTensor position;  // absent for -1
    if (offset >= 0) position = HostTensor::from_values(TDM_S64, {}, {double(offset)});
    const Attrs a = Attrs().number("base", offset == 700 ? 500.0 : 10000.0);
    Forward f{"rope", a, {random(s), position}, {{F64, s}}, {}};
    draw_cotangents(f, {0});
    check(f, 0, run1("rope_grad", a, {f.cotangents[0], position}, {F64, s}),
          "dx offset " + std::to_string(offset));
  }
}

// Llama 3.1's scaling changes only the frequencies, so rope_grad stays the
// transpose of rope; each of the three bands is checked by hand below.
TEST_F(Grad, RopeWithLlama3Scaling) {
  const Dims s{2, 3, 16};  // 8 pairs; context 48: bands kept, blended, slowed
  const Attrs a = Attrs()
                      .number("base", 500000.0)
                      .string("scaling", "llama3")
                      .number("factor", 8.0)
                      .number("low_freq_factor", 1.0)
                      .number("high_freq_factor", 4.0)
                      .integer("original_context", 48);
  const HostTensor position = HostTensor::from_values(TDM_S64, {}, {900});
  Forward f{"rope", a, {random(s), position}, {{F64, s}}, {}};
  draw_cotangents(f, {0});
  check(f, 0, run1("rope_grad", a, {f.cotangents[0], position}, {F64, s}), "dx scaled");
  // A unit vector in pair i's first element turns by p·f_i at position p:
  // y_i = cos(p·f_i). f_0 = 1 (48/2π > 4: kept); f_1 = 500000^(−1/8)
  // (48·f_1/2π ≈ 1.48: blended); f_2 = 500000^(−1/4) (≈ 0.29: divided by 8).
  const double f1 = std::pow(500000.0, -1.0 / 8), f2 = std::pow(500000.0, -1.0 / 4);
  const double blend = (48 * f1 / (2 * M_PI) - 1.0) / 3.0;
  const double expected[] = {1.0, (1 - blend) * f1 / 8 + blend * f1, f2 / 8};
  for (int i = 0; i < 3; ++i) {
    std::vector<double> unit(16, 0.0);
    unit[size_t(i)] = 1.0;
    const HostTensor y =
        run1("rope", a, {HostTensor::from_values(F64, {1, 16}, unit), position}, {F64, {1, 16}});
    EXPECT_NEAR(y.get(i), std::cos(900 * expected[i]), 1e-12) << "pair " << i;
    EXPECT_NEAR(y.get(i + 8), std::sin(900 * expected[i]), 1e-12) << "pair " << i;
  }
}

// rope is a rotation: rope_grad(rope(x)) = x, and norms of pairs are kept.
TEST_F(Grad, RopeGradInvertsRope) {
  const Dims s{3, 6};
  const HostTensor x = random(s);
  const HostTensor offset = HostTensor::from_values(TDM_S64, {}, {5});
  const HostTensor y = run1("rope", {}, {x, offset}, {F64, s});
  const HostTensor back = run1("rope_grad", {}, {y, offset}, {F64, s});
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(back.get(i), x.get(i), 1e-14) << i;
  // Row t = 0 at offset 5 is position 5: pair 0 turns by 5 radians.
  EXPECT_NEAR(y.get(0), x.get(0) * std::cos(5.0) - x.get(3) * std::sin(5.0), 1e-14);
}

struct AttentionCase {
  int64_t B, H, G, T, S, D, E;
  bool causal, mask;
  double dropout;
  bool tokens_first = false;  // layout "bthd"
};

void check_attention(const AttentionCase& c) {
  Attrs a;
  if (c.causal) a.integer("causal", 1);
  if (c.dropout > 0) a.number("dropout", c.dropout).integer("seed", 99);
  if (c.tokens_first) a.string("layout", "bthd");
  HostTensor mask, offset;
  if (c.mask) {
    mask = random({c.B, c.S}, Fill::ints(0, 1), TDM_U8);
    mask.set(c.S - 1, 0);  // batch 0 keeps its last key
    mask.set(0, 1);        // and pads its first: with causal, row 0 sees nothing
  }
  if (c.dropout > 0) offset = HostTensor::from_values(TDM_S64, {}, {12345});
  auto shape = [&](int64_t heads, int64_t n, int64_t w) {
    return Dims(tandem::AttentionLayout{c.tokens_first}.dims(c.B, heads, n, w));
  };
  const Dims q = shape(c.H, c.T, c.D), k = shape(c.G, c.S, c.D), v = shape(c.G, c.S, c.E);
  const Dims o = shape(c.H, c.T, c.E), lse{c.B, c.H, c.T};
  Forward f{"attention", a, {random(q), random(k), random(v), mask, offset}, {{F64, o}, {F64, lse}}, {}};
  draw_cotangents(f, {0});  // lse is saved for the backward, not part of L
  const auto fwd = run("attention", a, f.inputs, f.outputs);
  const auto g = run("attention_grad", a,
                     {f.cotangents[0], f.inputs[0], f.inputs[1], f.inputs[2], fwd[0], fwd[1], mask, offset},
                     {{F64, q}, {F64, k}, {F64, v}});
  const std::string what = a.str() + (c.mask ? " mask" : "");
  check(f, 0, g[0], "dq " + what);
  check(f, 1, g[1], "dk " + what);
  check(f, 2, g[2], "dv " + what);
}

TEST_F(Grad, Attention) {
  check_attention({2, 2, 2, 4, 4, 3, 3, false, false, 0});
  check_attention({1, 2, 2, 5, 5, 4, 2, true, false, 0});
}

TEST_F(Grad, AttentionGroupedAndMultiQueryHeads) {
  check_attention({2, 4, 2, 3, 3, 4, 4, true, false, 0});
  check_attention({1, 3, 1, 4, 4, 2, 3, false, false, 0});
}

// Fewer queries than keys (decoding with a KV cache): causal aligns the last
// query with the last key.
TEST_F(Grad, AttentionCausalWithFewerQueriesThanKeys) {
  check_attention({1, 2, 1, 2, 6, 4, 4, true, false, 0});
}

TEST_F(Grad, AttentionPaddingMaskAndDropout) {
  check_attention({2, 2, 2, 4, 4, 3, 3, true, true, 0});
  check_attention({2, 2, 1, 4, 5, 3, 3, false, true, 0.3});
}

// Layout "bthd": the heads after the positions, grouped heads, fewer
// queries than keys, a mask and dropout.
TEST_F(Grad, AttentionWithTheHeadsAfterThePositions) {
  check_attention({2, 4, 2, 3, 5, 4, 3, true, false, 0, true});
  check_attention({2, 2, 1, 4, 5, 3, 3, false, true, 0.3, true});
}

}  // namespace gradcheck
