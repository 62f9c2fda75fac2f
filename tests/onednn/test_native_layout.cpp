// Native layouts (ABI 1.3) in the oneDNN plugin: what kernel_layouts offers,
// that convolutions bound to native tensors add no activation reorders, and
// that every layout mix a kernel accepts gives the plain kernel's bytes
// (bit for bit: the layouts only move data, the arithmetic is the same).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugin_fixture.hpp"

using namespace onednn_test;

namespace {

using Dims = std::vector<int64_t>;
using Floats = std::vector<float>;

// One op with its tensors, attributes and layouts; owns every array the
// tdm_op_desc points into.
struct Op {
  std::string name;
  std::vector<Dims> ins, outs;
  std::vector<std::pair<std::string, Dims>> int_attrs;  // one entry: INT, more: INTS
  std::vector<uint8_t> layouts;                         // empty: all plain

  std::vector<tdm_tensor_desc> in_d, out_d;
  std::vector<tdm_attr> attrs;
  tdm_op_desc d{};

  const tdm_op_desc& desc() {
    in_d.clear();
    out_d.clear();
    attrs.clear();
    for (const Dims& x : ins) in_d.push_back(onednn_test::desc(TDM_F32, x));
    for (const Dims& y : outs) out_d.push_back(onednn_test::desc(TDM_F32, y));
    for (const auto& [key, values] : int_attrs) {
      tdm_attr a{};
      a.struct_size = sizeof a;
      a.name = key.c_str();
      a.type = values.size() == 1 ? TDM_ATTR_INT : TDM_ATTR_INTS;
      a.i = values[0];
      a.ints = values.data();
      a.count = values.size();
      attrs.push_back(a);
    }
    d = tdm_op_desc{};
    d.struct_size = sizeof d;
    d.op = name.c_str();
    d.op_version = 1;
    d.attrs = attrs.empty() ? nullptr : attrs.data();
    d.n_attrs = attrs.size();
    d.inputs = in_d.data();
    d.n_inputs = in_d.size();
    d.outputs = out_d.data();
    d.n_outputs = out_d.size();
    d.layouts = layouts.empty() ? nullptr : layouts.data();
    return d;
  }

  // The same op for the kit's runner.
  tc::Attrs attributes() const {
    tc::Attrs a;
    for (const auto& [key, values] : int_attrs) {
      if (values.size() == 1)
        a.integer(key, values[0]);
      else
        a.ints(key, values);
    }
    return a;
  }
  tc::RunOptions options() const {
    tc::RunOptions o;
    o.node_name.clear();
    o.layouts = layouts;
    return o;
  }
};

int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

int native_block();

// NCHW <-> nChw<B>c (C a multiple of B, the plugin's native block), by index
// arithmetic.
int64_t blocked_index(const Dims& d, int64_t n, int64_t c, int64_t h, int64_t w) {
  const int64_t b = native_block();
  return (((n * (d[1] / b) + c / b) * d[2] + h) * d[3] + w) * b + c % b;
}
Floats convert(const Floats& x, const Dims& d, bool to_native) {
  Floats y(x.size());
  int64_t plain = 0;
  for (int64_t n = 0; n < d[0]; ++n)
    for (int64_t c = 0; c < d[1]; ++c)
      for (int64_t h = 0; h < d[2]; ++h)
        for (int64_t w = 0; w < d[3]; ++w, ++plain) {
          const int64_t b = blocked_index(d, n, c, h, w);
          if (to_native)
            y[b] = x[plain];
          else
            y[plain] = x[b];
        }
  return y;
}

struct Answer {
  std::vector<uint8_t> accepts, offers;
  std::vector<uint64_t> bytes;
};
Answer ask(Op& op) {
  Fixture& f = loaded();
  const tdm_op_desc& d = op.desc();
  Answer a{std::vector<uint8_t>(d.n_inputs), std::vector<uint8_t>(d.n_outputs),
           std::vector<uint64_t>(d.n_outputs)};
  EXPECT_EQ(f.api->kernel_layouts(f.device, &d, a.accepts.data(), a.offers.data(), a.bytes.data()), TDM_OK)
      << last_error();
  return a;
}

// Runs `op` with its layouts on plain inputs (converted where native) through
// the kit's runner; returns the outputs converted back to plain, and the
// kernel's description.
std::vector<Floats> run(Op& op, const std::vector<Floats>& inputs, std::string* described = nullptr) {
  const size_t n_in = op.ins.size();
  auto native = [&](size_t k) { return !op.layouts.empty() && op.layouts[k] != 0; };
  std::vector<tc::HostTensor> in;
  for (size_t i = 0; i < n_in; ++i) {
    const Floats x = native(i) ? convert(inputs[i], op.ins[i], true) : inputs[i];
    in.emplace_back(TDM_F32, op.ins[i]);
    std::memcpy(in.back().data(), x.data(), in.back().size_bytes());
  }
  std::vector<tandem::TensorShape> outs;
  for (const Dims& y : op.outs) outs.emplace_back(TDM_F32, y);
  const tc::RunResult r = tc::run_op(*loaded().kit, op.name, op.attributes(), in, outs, op.options());
  EXPECT_TRUE(r.outcome.ok()) << r.outcome.message;
  if (!r.outcome.ok()) return {};
  if (described != nullptr) *described = r.implementation;
  std::vector<Floats> out;
  for (size_t j = 0; j < op.outs.size(); ++j) {
    Floats y(size_t(numel(op.outs[j])));
    std::memcpy(y.data(), r.outputs[j].data(), r.outputs[j].size_bytes());
    out.push_back(native(n_in + j) ? convert(y, op.outs[j], false) : y);
  }
  return out;
}

void expect_same_bits(const Floats& a, const Floats& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

// Values with many ties (a few levels), signed zeros and a NaN now and then:
// what the max-pool tie rule is about.
Floats tie_data(const Dims& d, unsigned seed, bool nans) {
  std::mt19937 rng(seed);
  Floats x(size_t(numel(d)));
  for (float& v : x) {
    const unsigned r = rng() % 64;
    v = r == 0 && nans ? std::numeric_limits<float>::quiet_NaN() : r == 1 ? -0.f : float(int(r % 5) - 2);
  }
  return x;
}
Floats uniform_data(const Dims& d, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Floats x(size_t(numel(d)));
  for (float& v : x) v = u(rng);
  return x;
}

// The channel block of the plugin's native layout, read from its answers:
// 8 when a relu on 8 channels may be native (AVX2: nChw8c), 16 when only 16
// channels may (AVX-512: nChw16c), 0 when neither.
int native_block() {
  static const int block = [] {
    Op relu8{"relu", {{1, 8, 2, 2}}, {{1, 8, 2, 2}}, {}, {}};
    Op relu16{"relu", {{1, 16, 2, 2}}, {{1, 16, 2, 2}}, {}, {}};
    return ask(relu8).offers[0] == 1 ? 8 : ask(relu16).offers[0] == 1 ? 16 : 0;
  }();
  return block;
}

// Every CPU oneDNN runs on has AVX2 (nChw8c) or AVX-512 (nChw16c) blocked
// convolutions; a CPU with neither (SSE4.1 only) has no native layout.
bool native_available() {
  return native_block() != 0;
}

Op conv(const Dims& x, int64_t k) {
  return Op{"conv2d", {x, {k, x[1], 5, 5}, {k}}, {{x[0], k, x[2], x[3]}}, {{"padding", {2, 2}}}, {}};
}

}  // namespace

TEST(OnednnNativeLayout, AnswersFollowShapeAndDtype) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  ASSERT_NE(loaded().api->kernel_layouts, nullptr);
  if (!native_available()) GTEST_SKIP() << "oneDNN prefers no blocked layout (nChw8c or nChw16c) on this CPU";
  Op conv2 = conv({64, 32, 14, 14}, 64);
  Answer a = ask(conv2);
  EXPECT_EQ(a.accepts, (std::vector<uint8_t>{1, 0, 0}));  // x only: weights and bias stay plain
  EXPECT_EQ(a.offers, (std::vector<uint8_t>{1}));
  EXPECT_EQ(a.bytes[0], uint64_t(64 * 64 * 14 * 14 * 4));
  Op conv1 = conv({64, 1, 28, 28}, 32);  // C = 1 is not a multiple of the block
  a = ask(conv1);
  EXPECT_EQ(a.accepts[0], 0);
  EXPECT_EQ(a.offers[0], 1);
  Op conv8 = conv({64, 8, 14, 14}, 24);  // C = 8, K = 24: native only with 8-wide blocks
  a = ask(conv8);
  EXPECT_EQ(a.accepts[0], native_block() == 8 ? 1 : 0);
  EXPECT_EQ(a.offers[0], native_block() == 8 ? 1 : 0);
  Op pool2{"max_pool2d", {{64, 64, 14, 14}}, {{64, 64, 7, 7}}, {{"kernel", {2}}}, {}};
  a = ask(pool2);
  EXPECT_EQ(a.accepts[0], 1);
  EXPECT_EQ(a.offers[0], 1);
  Op pool3{"max_pool2d", {{64, 64, 14, 14}}, {{64, 64, 4, 4}}, {{"kernel", {3}}}, {}};
  a = ask(pool3);  // only the 2x2 stride-2 window has a native kernel
  EXPECT_EQ(a.accepts[0], 0);
  EXPECT_EQ(a.offers[0], 0);
  Op reshape{"reshape", {{64, 64, 7, 7}}, {{64, 3136}}, {{"shape", {64, 3136}}}, {}};
  a = ask(reshape);  // a chain's edge
  EXPECT_EQ(a.accepts[0], 0);
}

TEST(OnednnNativeLayout, ConvolutionsInsideAChainAddNoActivationReorders) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  if (!native_available()) GTEST_SKIP() << "oneDNN prefers no blocked layout (nChw8c or nChw16c) on this CPU";
  const Dims x{4, 32, 14, 14}, w{64, 32, 5, 5}, y{4, 64, 14, 14};
  const Floats xv = uniform_data(x, 1), wv = uniform_data(w, 2), bv = uniform_data(Dims{64}, 3),
               dyv = uniform_data(y, 4);
  struct Case {
    Op op;
    std::vector<Floats> inputs;
    std::vector<uint8_t> native;
  };
  std::vector<Case> cases;
  cases.push_back({conv(x, 64), {xv, wv, bv}, {1, 0, 0, 1}});
  cases.push_back({Op{"conv2d_grad_input", {y, w}, {x}, {{"padding", {2, 2}}}, {}}, {dyv, wv}, {1, 0, 1}});
  cases.push_back(
      {Op{"conv2d_grad_weight", {y, x}, {w, {64}}, {{"padding", {2, 2}}}, {}}, {dyv, xv}, {1, 1, 0, 0}});
  for (Case& c : cases) {
    std::string plain_described, native_described;
    const std::vector<Floats> plain = run(c.op, c.inputs, &plain_described);
    c.op.layouts = c.native;
    const std::vector<Floats> native = run(c.op, c.inputs, &native_described);
    // One reorder is left: the plain weights (or weight gradient) to and from
    // oneDNN's blocked weights; the plain run also reorders two activations.
    EXPECT_NE(native_described.find("reorders=1 "), std::string::npos) << native_described;
    EXPECT_NE(plain_described.find("reorders=3 "), std::string::npos) << plain_described;
    ASSERT_EQ(plain.size(), native.size());
    for (size_t j = 0; j < plain.size(); ++j) expect_same_bits(plain[j], native[j], c.op.name);
  }
}

// A one-channel convolution's weight gradient (the plugin's own kernel on
// AVX2, oneDNN's on AVX-512) reads dy in the layout the ReLU before it
// leaves: the same bits as from plain dy, and dy is accepted native.
TEST(OnednnNativeLayout, SingleChannelWeightGradientReadsNativeDyBitForBit) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  if (!native_available()) GTEST_SKIP() << "oneDNN prefers no blocked layout (nChw8c or nChw16c) on this CPU";
  const Dims x{3, 1, 12, 10}, dy{3, 16, 12, 10}, w{16, 1, 5, 5};
  Op op{"conv2d_grad_weight", {dy, x}, {w, {16}}, {{"padding", {2, 2}}}, {}};
  EXPECT_EQ(ask(op).accepts[0], 1);
  const std::vector<Floats> inputs = {uniform_data(dy, 9), uniform_data(x, 10)};
  const std::vector<Floats> plain = run(op, inputs);
  op.layouts = {1, 0, 0, 0};
  const std::vector<Floats> native = run(op, inputs);
  ASSERT_EQ(plain.size(), native.size());
  for (size_t j = 0; j < plain.size(); ++j)
    expect_same_bits(plain[j], native[j], "output " + std::to_string(j));
}

TEST(OnednnNativeLayout, MaxPoolEveryLayoutMixMatchesPlainBitForBit) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  if (!native_available()) GTEST_SKIP() << "oneDNN prefers no blocked layout (nChw8c or nChw16c) on this CPU";
  const Dims x{3, 32, 7, 9}, y{3, 32, 3, 4};  // odd H and W: a row and a column no window covers
  const Floats xv = tie_data(x, 5, true), dyv = tie_data(y, 6, false);
  Op fwd{"max_pool2d", {x}, {y}, {{"kernel", {2, 2}}}, {}};
  const Floats y_plain = run(fwd, {xv})[0];
  for (uint8_t xn : {0, 1})
    for (uint8_t yn : {0, 1}) {
      fwd.layouts = {xn, yn};
      expect_same_bits(run(fwd, {xv})[0], y_plain,
                       "max_pool2d x " + std::to_string(xn) + " y " + std::to_string(yn));
    }
  Op bwd{"max_pool2d_grad", {y, x}, {x}, {{"kernel", {2, 2}}}, {}};
  const Floats dx_plain = run(bwd, {dyv, xv})[0];
  for (int mix = 1; mix < 8; ++mix) {
    bwd.layouts = {uint8_t(mix & 1), uint8_t(mix >> 1 & 1), uint8_t(mix >> 2 & 1)};
    expect_same_bits(run(bwd, {dyv, xv})[0], dx_plain, "max_pool2d_grad mix " + std::to_string(mix));
  }
}

TEST(OnednnNativeLayout, ActivationsComputeInTheirOutputLayout) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  if (!native_available()) GTEST_SKIP() << "oneDNN prefers no blocked layout (nChw8c or nChw16c) on this CPU";
  const Dims x{2, 16, 5, 3};
  const Floats xv = uniform_data(x, 7), dyv = uniform_data(x, 8);
  Op relu{"relu", {x}, {x}, {}, {}};
  const Floats y_plain = run(relu, {xv})[0];
  Op grad{"relu_grad", {x, x}, {x}, {}, {}};
  const Floats dx_plain = run(grad, {dyv, xv})[0];
  for (int mix = 1; mix < 4; ++mix) {
    relu.layouts = {uint8_t(mix & 1), uint8_t(mix >> 1 & 1)};
    expect_same_bits(run(relu, {xv})[0], y_plain, "relu mix " + std::to_string(mix));
  }
  for (int mix = 1; mix < 8; ++mix) {
    grad.layouts = {uint8_t(mix & 1), uint8_t(mix >> 1 & 1), uint8_t(mix >> 2 & 1)};
    expect_same_bits(run(grad, {dyv, xv})[0], dx_plain, "relu_grad mix " + std::to_string(mix));
  }
}

TEST(OnednnNativeLayout, ANativeTensorItNeverOffersIsRefused) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  Op reshape{"reshape", {{2, 16, 2, 2}}, {{2, 64}}, {{"shape", {2, 64}}}, {1, 0}};
  const tc::RunResult r =
      tc::run_op(*loaded().kit, reshape.name, reshape.attributes(), {tc::HostTensor(TDM_F32, reshape.ins[0])},
                 {{TDM_F32, reshape.outs[0]}}, reshape.options());
  EXPECT_EQ(r.status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(r.failed_at, tc::RunStep::prepare);
  EXPECT_NE(r.plugin_message.find("marked native"), std::string::npos) << r.plugin_message;
}
