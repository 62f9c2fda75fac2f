// The attention gradient's two schedules (ops/attention.cpp): one pass per
// (batch, kv head) when there are at least two such tasks per thread, else
// two passes with a task per tile. Which one runs depends on the thread
// count, so the same inputs must give the same bits on either; the
// conformance kit checks the values against the reference backend.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "plugin_fixture.hpp"
#include "tandem/dropout_mask.hpp"

using namespace onednn_test;

namespace {

// Values that are not round numbers, so a changed summation order shows.
tc::HostTensor wavy(const std::vector<int64_t>& dims, double phase) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = std::sin(0.37 * double(i) + phase) * 0.8;
  return tc::HostTensor::from_values(TDM_F32, dims, v);
}

// B·G = 4 (kv) tasks: one pass on 1 thread (4 >= 2·1), two passes on 4
// threads (4 < 2·4). T = 130: three query and key tiles of 64, the last
// partial; grouped heads.
constexpr int64_t kB = 2, kH = 4, kG = 2, kT = 130, kD = 32;

// q, k, v ("bhtd") from `phase`, a mask whose key `padded` (a flat index
// into [B, T]) is padding, and a seed_offset.
struct Operands {
  tc::HostTensor q, k, v, mask, offset;
};
Operands operands(double phase, int64_t padded, int64_t seed_offset) {
  std::vector<double> keys(size_t(kB * kT), 0.0);
  keys[size_t(padded)] = 1;
  return {wavy({kB, kH, kT, kD}, phase), wavy({kB, kG, kT, kD}, phase + 0.6),
          wavy({kB, kG, kT, kD}, phase + 1.2), tc::HostTensor::from_values(TDM_U8, {kB, kT}, keys),
          tc::HostTensor::from_values(TDM_S64, {}, {double(seed_offset)})};
}

}  // namespace

// Causal with padding (the last key of batch 0) and dropout.
TEST(OnednnAttention, GradientIsTheSameBitsInOneOrTwoPasses) {
  Fixture& f = loaded();
  ASSERT_NE(f.device, nullptr) << last_error();
  const auto [q, k, v, mask, offset] = operands(0.1, kT - 1, 5);
  tc::Attrs attrs;
  attrs.integer("causal", 1).number("dropout", 0.1).integer("seed", 17);

  const tc::RunResult fwd = tc::run_op(*f.kit, "attention", attrs, {q, k, v, mask, offset},
                                       {{TDM_F32, {kB, kH, kT, kD}}, {TDM_F32, {kB, kH, kT}}});
  ASSERT_TRUE(fwd.outcome.ok()) << fwd.outcome.message;
  const tc::HostTensor dout = wavy({kB, kH, kT, kD}, 2.9);
  const auto grad = [&](int threads) {
    ThreadCount use(threads);
    return tc::run_op(
        *f.kit, "attention_grad", attrs, {dout, q, k, v, fwd.outputs[0], fwd.outputs[1], mask, offset},
        {{TDM_F32, {kB, kH, kT, kD}}, {TDM_F32, {kB, kG, kT, kD}}, {TDM_F32, {kB, kG, kT, kD}}});
  };
  const tc::RunResult one_pass = grad(1), two_passes = grad(4);
  ASSERT_TRUE(one_pass.outcome.ok()) << one_pass.outcome.message;
  ASSERT_TRUE(two_passes.outcome.ok()) << two_passes.outcome.message;
  const char* names[] = {"dq", "dk", "dv"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(one_pass.outputs[i].bitwise_equal(two_passes.outputs[i])) << names[i];
    double norm = 0;
    for (double x : one_pass.outputs[i].to_f64()) norm += x * x;
    EXPECT_GT(norm, 1e-3) << names[i] << " is all zeros: the test would prove nothing";
  }
}

// The attention's dropout factors (ops/vector_loops*: the catalog's mask
// written out as an integer test, compiled per vector level) against the
// SDK's mask, at drop probabilities from tiny to nearly 1. With q = 0 every
// score is 0, so each probability is 1/S, and v = the identity makes
// o[t][e] = d(t, e)/S: zero exactly where the mask drops key e for query t.
TEST(OnednnAttention, DropoutKeepsWhatTheCatalogsMaskKeeps) {
  Fixture& f = loaded();
  ASSERT_NE(f.device, nullptr) << last_error();
  const int64_t T = 3, S = 300;  // five key tiles, the last partial
  const uint64_t seed = 4242;
  std::vector<double> identity(size_t(S * S), 0.0);
  for (int64_t s = 0; s < S; ++s) identity[size_t(s * S + s)] = 1;
  const tc::HostTensor q =
      tc::HostTensor::from_values(TDM_F32, {1, 1, T, 1}, std::vector<double>(size_t(T), 0));
  const tc::HostTensor k = wavy({1, 1, S, 1}, 0.3);
  const tc::HostTensor v = tc::HostTensor::from_values(TDM_F32, {1, 1, S, S}, identity);
  // And the edge of the mask's test: p equal to an element's u (kept, as
  // u >= p), and p half a 2^-24 step above it (dropped), a float where u is
  // below 0.5.
  int64_t edge = 0;
  while (tandem::dropout_uniform(seed, uint64_t(edge)) >= 0.5f) ++edge;
  const float u = tandem::dropout_uniform(seed, uint64_t(edge)), above = u + 0x1p-25f;
  ASSERT_LT(edge, T * S);
  ASSERT_GT(above, u);
  for (double p : {1e-7, 0.1, 0.2, 0.5, 0.9, 0.9999, double(u), double(above)}) {
    SCOPED_TRACE("p = " + std::to_string(p));
    tc::Attrs attrs;
    attrs.number("dropout", p).integer("seed", int64_t(seed));
    const tc::RunResult r =
        tc::run_op(*f.kit, "attention", attrs, {q, k, v}, {{TDM_F32, {1, 1, T, S}}, {TDM_F32, {1, 1, T}}});
    ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
    const std::vector<double> o = r.outputs[0].to_f64();
    const double scale = 1.f / (1.f - float(p));  // the kept factor, in f32 as the kernel has it
    int64_t dropped = 0, wrong = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < S; ++e) {
        const bool kept = tandem::dropout_keep(seed, uint64_t(t * S + e), float(p));
        const double got = o[size_t(t * S + e)];
        dropped += kept ? 0 : 1;
        if (kept ? !(std::fabs(got * double(S) / scale - 1) < 1e-5) : got != 0) ++wrong;
      }
    EXPECT_EQ(wrong, 0) << "of " << T * S << " elements, " << dropped << " dropped by the mask";
  }
}

namespace {

// x [B, A, C, D] as [B, C, A, D]: a "bhtd" tensor in "bthd" and back.
tc::HostTensor swap_axes_1_2(const tc::HostTensor& x) {
  const std::vector<int64_t>& d = x.dims();
  const std::vector<double> in = x.to_f64();
  std::vector<double> out(in.size());
  for (int64_t b = 0; b < d[0]; ++b)
    for (int64_t a = 0; a < d[1]; ++a)
      for (int64_t c = 0; c < d[2]; ++c)
        for (int64_t i = 0; i < d[3]; ++i)
          out[size_t(((b * d[2] + c) * d[1] + a) * d[3] + i)] =
              in[size_t(((b * d[1] + a) * d[2] + c) * d[3] + i)];
  return tc::HostTensor::from_values(x.dtype(), {d[0], d[2], d[1], d[3]}, out);
}

}  // namespace

// Layout "bthd" moves a head's rows, not its sums: the forward and both
// gradient schedules give the bits of "bhtd", with the heads after the
// positions. Grouped heads, three tiles of 64 (the last partial), causal
// with padding and dropout.
TEST(OnednnAttention, HeadsAfterThePositionsGiveTheSameBitsMoved) {
  Fixture& f = loaded();
  ASSERT_NE(f.device, nullptr) << last_error();
  const auto [q, k, v, mask, offset] = operands(0.2, 2 * kT - 1, 3);
  tc::Attrs heads, tokens;
  heads.integer("causal", 1).number("dropout", 0.1).integer("seed", 23);
  tokens = heads;
  tokens.string("layout", "bthd");
  const tc::HostTensor dout = wavy({kB, kH, kT, kD}, 3.1);
  for (int threads : {1, 4}) {  // the gradient in one pass, then in two
    SCOPED_TRACE("threads " + std::to_string(threads));
    ThreadCount use(threads);
    const tc::RunResult fwd = tc::run_op(*f.kit, "attention", heads, {q, k, v, mask, offset},
                                         {{TDM_F32, {kB, kH, kT, kD}}, {TDM_F32, {kB, kH, kT}}});
    const tc::RunResult fwd_t = tc::run_op(
        *f.kit, "attention", tokens, {swap_axes_1_2(q), swap_axes_1_2(k), swap_axes_1_2(v), mask, offset},
        {{TDM_F32, {kB, kT, kH, kD}}, {TDM_F32, {kB, kH, kT}}});
    ASSERT_TRUE(fwd.outcome.ok()) << fwd.outcome.message;
    ASSERT_TRUE(fwd_t.outcome.ok()) << fwd_t.outcome.message;
    EXPECT_TRUE(swap_axes_1_2(fwd_t.outputs[0]).bitwise_equal(fwd.outputs[0])) << "o";
    EXPECT_TRUE(fwd_t.outputs[1].bitwise_equal(fwd.outputs[1])) << "lse";
    const tc::RunResult grad = tc::run_op(
        *f.kit, "attention_grad", heads, {dout, q, k, v, fwd.outputs[0], fwd.outputs[1], mask, offset},
        {{TDM_F32, {kB, kH, kT, kD}}, {TDM_F32, {kB, kG, kT, kD}}, {TDM_F32, {kB, kG, kT, kD}}});
    const tc::RunResult grad_t =
        tc::run_op(*f.kit, "attention_grad", tokens,
                   {swap_axes_1_2(dout), swap_axes_1_2(q), swap_axes_1_2(k), swap_axes_1_2(v),
                    fwd_t.outputs[0], fwd_t.outputs[1], mask, offset},
                   {{TDM_F32, {kB, kT, kH, kD}}, {TDM_F32, {kB, kT, kG, kD}}, {TDM_F32, {kB, kT, kG, kD}}});
    ASSERT_TRUE(grad.outcome.ok()) << grad.outcome.message;
    ASSERT_TRUE(grad_t.outcome.ok()) << grad_t.outcome.message;
    const char* names[] = {"dq", "dk", "dv"};
    for (size_t i = 0; i < 3; ++i)
      EXPECT_TRUE(swap_axes_1_2(grad_t.outputs[i]).bitwise_equal(grad.outputs[i])) << names[i];
  }
}
