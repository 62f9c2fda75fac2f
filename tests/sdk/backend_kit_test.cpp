// sdk.backend_kit: the backend kit (backend_kit.hpp, attention_operands.hpp)
// and the 16-bit float conversions (half.hpp) as a third-party backend uses
// them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "op_desc.hpp"
#include "tandem/attention_operands.hpp"
#include "tandem/backend_kit.hpp"
#include "tandem/half.hpp"

namespace {

using tandem::Check;
using tandem::OpView;

Desc add_desc(std::vector<int64_t> a, std::vector<int64_t> b, std::vector<int64_t> y,
              tdm_dtype dt = TDM_F32) {
  Desc d;
  d.op = "add";
  d.in_dims = {std::move(a), std::move(b)};
  d.in_types = {dt, dt};
  d.out_dims = {std::move(y)};
  d.out_types = {dt};
  return d;
}

TEST(BackendKit, CheckMessagesNameBackendOpNodeAndTensor) {
  Desc d = add_desc({2, 3}, {2, 3}, {2, 2});
  d.node = "block1.residual";
  const OpView view(d.get());
  const Check c(view, "mine");
  EXPECT_EQ(c.where(), "op 'add' (node 'block1.residual')");
  const Thrown t = thrown([&] { c.output(0, TDM_F32, {2, 3}); });
  EXPECT_EQ(t.status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(t.message, "mine: op 'add' (node 'block1.residual'): output 0: expected f32[2,3], got f32[2,2]");
  EXPECT_EQ(thrown([&] { c.counts(3, 3, 1, 1); }).message,
            "mine: op 'add' (node 'block1.residual'): expected 3 inputs, got 2");
  EXPECT_NE(thrown([&] { c.counts(1, 1, 1, 2); }).message.find("expected 1 inputs"), std::string::npos);
}

TEST(BackendKit, PrimaryDtypeIsUnsupportedOtherDtypesFail) {
  Desc d = add_desc({4}, {4}, {4}, TDM_F16);
  const OpView view(d.get());
  const Check c(view, "mine");
  const Thrown primary = thrown([&] { c.primary_dtype(0, {TDM_F32, TDM_BF16}); });
  EXPECT_EQ(primary.status, TDM_UNSUPPORTED);
  EXPECT_NE(primary.message.find("dtype f16 of input 0 is not implemented (supported: f32/bf16)"),
            std::string::npos)
      << primary.message;
  EXPECT_EQ(c.primary_dtype(0, {TDM_F16}), TDM_F16);
  EXPECT_EQ(thrown([&] { c.input_dtype(1, {TDM_F32}); }).status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(thrown([&] { c.input(1, TDM_F16, {5}); }).status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(thrown([&] { c.input_rank(0, 2); }).status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(thrown([&] { c.input_dtype(2, {TDM_F16}); }).message, "mine: op 'add': input 2 is required");
  EXPECT_FALSE(c.has_input(2));
  EXPECT_TRUE(c.has_output(0));
}

TEST(BackendKit, AttributesAndAxes) {
  Desc d = add_desc({4}, {4}, {4});
  const int64_t stride[] = {2};
  const double scales[] = {0.5, 0.25};
  tdm_attr a{};
  a.struct_size = sizeof a;
  a.name = "stride";
  a.type = TDM_ATTR_INTS;
  a.ints = stride;
  a.count = 1;
  d.attrs.push_back(a);
  a = tdm_attr{};
  a.struct_size = sizeof a;
  a.name = "scale";
  a.type = TDM_ATTR_FLOATS;
  a.floats = scales;
  a.count = 2;
  d.attrs.push_back(a);
  a = tdm_attr{};
  a.struct_size = sizeof a;
  a.name = "epsilon";
  a.type = TDM_ATTR_STRING;
  a.s = "small";
  d.attrs.push_back(a);
  const OpView view(d.get());
  const Check c(view, "mine");
  EXPECT_EQ(c.pair_attr("stride", {1, 1}), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(c.pair_attr("padding", {0, 1}), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(c.floats_attr("scale"), (std::vector<double>{0.5, 0.25}));
  EXPECT_NE(thrown([&] { c.floats_attr("w_scale"); }).message.find("'w_scale' is required"),
            std::string::npos);
  EXPECT_EQ(thrown([&] { c.float_attr("epsilon", 1e-5); }).status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(c.axis(-1, 3), 2u);
  EXPECT_EQ(c.axis(1, 3), 1u);
  EXPECT_NE(thrown([&] { c.axis(3, 3, "dim"); }).message.find("dim 3 is out of range for rank 3"),
            std::string::npos);
}

// A device for launching: FnKernels never look at it.
class HostOnlyDevice final : public tandem::Device {
 public:
  tdm_device_info info() override { return tdm_device_info{}; }
  void* allocate(size_t) override { return nullptr; }
  void deallocate(void*) noexcept override {}
  std::unique_ptr<tandem::Kernel> prepare(const OpView&, size_t&) override { return nullptr; }
};

std::unique_ptr<tandem::Kernel> make_add(const OpView& op, size_t& workspace) {
  Check c(op, "mine");
  c.counts(2, 2, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, {TDM_F32});
  c.input(1, dt, c.in(0).dims);
  c.output(0, dt, c.in(0).dims);
  workspace = 64;
  const int64_t n = c.in(0).numel();
  return tandem::make_fn_kernel("mine:add", [n](void* const* in, void* const* out) {
    for (int64_t i = 0; i < n; ++i)
      static_cast<float*>(out[0])[i] =
          static_cast<const float*>(in[0])[i] + static_cast<const float*>(in[1])[i];
  });
}

TEST(BackendKit, RegistryChecksBeforeAnyFactoryRuns) {
  tandem::KernelRegistry<> registry("mine");
  registry.add("add", make_add);
  EXPECT_THROW(registry.add("add", make_add), std::logic_error);
  EXPECT_EQ(registry.names(), std::vector<std::string>{"add"});

  Desc good = add_desc({3}, {3}, {3});
  size_t ws = 7;
  std::unique_ptr<tandem::Kernel> k = registry.prepare(OpView(good.get()), ws);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(ws, 64u);
  EXPECT_STREQ(k->describe(), "mine:add");
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, y[3] = {};
  void* in[] = {a, b};
  void* out[] = {y};
  HostOnlyDevice device;
  tandem::Stream stream(device);
  k->launch(stream, in, out, nullptr);
  EXPECT_EQ(y[2], 33.f);

  Desc unknown = good;
  unknown.op = "frobnicate";
  Thrown t = thrown([&] { registry.prepare(OpView(unknown.get()), ws); });
  EXPECT_EQ(t.status, TDM_UNSUPPORTED);
  EXPECT_EQ(t.message, "mine: op 'frobnicate' is not implemented");

  Desc newer = good;
  newer.version = 2;
  t = thrown([&] { registry.prepare(OpView(newer.get()), ws); });
  EXPECT_EQ(t.status, TDM_UNSUPPORTED);
  EXPECT_NE(t.message.find("version 2 is newer than the catalog version 1"), std::string::npos) << t.message;

  Desc negative = add_desc({-1}, {3}, {3});
  t = thrown([&] { registry.prepare(OpView(negative.get()), ws); });
  EXPECT_EQ(t.status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(t.message, "mine: op 'add': input 0 has a negative dimension f32[-1]");
}

TEST(BackendKit, SectionListBuildsTheRegistryFromEveryEnlistedSection) {
  tandem::SectionList<tandem::KernelRegistry<>> sections;
  EXPECT_TRUE(sections.enlist([](tandem::KernelRegistry<>& r) { r.add("add", make_add); }));
  EXPECT_TRUE(sections.enlist([](tandem::KernelRegistry<>& r) { r.add("sub", make_add); }));
  const tandem::KernelRegistry<> registry = sections.build("mine");
  EXPECT_EQ(registry.backend(), "mine");
  EXPECT_EQ(registry.names(), (std::vector<std::string>{"add", "sub"}));
  // Two sections registering one op is a bug, found when the registry is built.
  EXPECT_TRUE(sections.enlist([](tandem::KernelRegistry<>& r) { r.add("add", make_add); }));
  EXPECT_THROW(sections.build("mine"), std::logic_error);
}

// A backend whose factories need its device, and whose entries carry more
// than a factory.
struct Ctx {
  int prepared = 0;
};
using CtxFactory = std::unique_ptr<tandem::Kernel> (*)(Ctx&, const OpView&, size_t&);

TEST(BackendKit, RegistryPassesTheBackendsContext) {
  tandem::KernelRegistry<CtxFactory> registry("ctx", 2);
  registry.add("add", [](Ctx& ctx, const OpView&, size_t&) -> std::unique_ptr<tandem::Kernel> {
    ++ctx.prepared;
    return tandem::make_fn_kernel("ctx:add", [](void* const*, void* const*, void*) {});
  });
  Ctx ctx;
  Desc d = add_desc({3}, {3}, {3});
  d.version = 2;
  size_t ws = 0;
  EXPECT_NE(registry.prepare(OpView(d.get()), ws, ctx), nullptr);
  EXPECT_EQ(ctx.prepared, 1);
  EXPECT_NE(registry.find("add"), nullptr);
  EXPECT_EQ(registry.find("sub"), nullptr);
}

// ---- half.hpp ---------------------------------------------------------------

bool is_nan16(uint16_t b, int mantissa_bits) {
  const uint16_t exponent = uint16_t(0x7fff & ~((1u << mantissa_bits) - 1));
  return (b & exponent) == exponent && (b & ((1u << mantissa_bits) - 1)) != 0;
}

// attention's q, k, v (and the optional mask) as the catalog lays them out,
// with its attributes.
Desc attention_desc(std::vector<int64_t> q, std::vector<int64_t> k, std::vector<int64_t> v) {
  Desc d;
  d.op = "attention";
  d.node = "h.0.attn";
  d.in_dims = {std::move(q), std::move(k), std::move(v)};
  d.in_types = {TDM_F32, TDM_F32, TDM_F32};
  return d;
}
void set_string(Desc& d, const char* name, const char* value) {
  d.attrs.push_back(attr(name, TDM_ATTR_STRING));
  d.attrs.back().s = value;
}
void set_float(Desc& d, const char* name, double value) {
  d.attrs.push_back(attr(name, TDM_ATTR_FLOAT));
  d.attrs.back().f = value;
}
void set_int(Desc& d, const char* name, int64_t value) {
  d.attrs.push_back(attr(name, TDM_ATTR_INT));
  d.attrs.back().i = value;
}
// Why the registry refuses an attention description before any factory
// runs (the attention rule of tandem/op_shapes.hpp and the catalog).
std::string attention_refusal(Desc d) {
  d.out_dims = {{1}, {1}};  // counted first; the rule fails before they are compared
  d.out_types = {TDM_F32, TDM_F32};
  tandem::KernelRegistry<> registry("mine");
  registry.add("attention", [](const OpView& op, size_t&) -> std::unique_ptr<tandem::Kernel> {
    tandem::check_attention_operands(Check(op, "mine"), 0, 3, TDM_F32);
    return nullptr;
  });
  size_t ws = 0;
  const Thrown t = thrown([&] { registry.prepare(OpView(d.get()), ws); });
  EXPECT_EQ(t.status, TDM_INVALID_ARGUMENT) << t.message;
  return t.message;
}

TEST(AttentionOperands, SizesOfEitherLayoutAndTheDefaults) {
  // 4 query heads of 8 positions, 2 key/value heads of 10 keys, q and k 16
  // wide, v 12.
  Desc heads_first = attention_desc({2, 4, 8, 16}, {2, 2, 10, 16}, {2, 2, 10, 12});
  Desc tokens_first = attention_desc({2, 8, 4, 16}, {2, 10, 2, 16}, {2, 10, 2, 12});
  set_string(tokens_first, "layout", "bthd");
  for (Desc* d : {&heads_first, &tokens_first}) {
    const OpView view(d->get());
    const Check c(view, "mine");
    const tandem::AttentionOperands a = tandem::check_attention_operands(c, 0, 3, TDM_F32);
    EXPECT_EQ(a.layout.tokens_first, d == &tokens_first);
    EXPECT_EQ(std::vector<int64_t>({a.B, a.H, a.G, a.T, a.S, a.D, a.E}),
              std::vector<int64_t>({2, 4, 2, 8, 10, 16, 12}));
    const tandem::Dims o = d == &tokens_first ? tandem::Dims{2, 8, 4, 12} : tandem::Dims{2, 4, 8, 12};
    EXPECT_EQ(a.shape(a.H, a.T, a.E), o);
    EXPECT_EQ(a.scale, 0.25);  // 1/√D
    EXPECT_EQ(a.dropout, 0.0);
    EXPECT_FALSE(a.causal);
    EXPECT_FALSE(a.has_mask);
    EXPECT_FALSE(a.has_offset);
  }

  Desc d = attention_desc({1, 2, 4, 8}, {1, 2, 6, 8}, {1, 2, 6, 8});
  d.in_dims.push_back({1, 6});  // the mask at `extras`, then seed_offset
  d.in_types.push_back(TDM_U8);
  d.in_dims.push_back({});
  d.in_types.push_back(TDM_S64);
  set_int(d, "causal", 1);
  set_float(d, "scale", 0.5);
  set_float(d, "dropout", 0.1);
  set_int(d, "seed", 7);
  const OpView view(d.get());
  const Check c(view, "mine");
  const tandem::AttentionOperands a = tandem::check_attention_operands(c, 0, 3, TDM_F32);
  EXPECT_TRUE(a.causal);
  EXPECT_EQ(a.scale, 0.5);
  EXPECT_EQ(a.dropout, 0.1);
  EXPECT_EQ(a.seed, 7u);
  EXPECT_TRUE(a.has_mask);
  EXPECT_TRUE(a.has_offset);
  EXPECT_EQ(a.mask_slot, 3u);
  EXPECT_EQ(a.offset_slot, 4u);
}

TEST(AttentionOperands, RefusalsNameTheOpNodeAndWhatIsWrong) {
  const std::string where = "mine: op 'attention' (node 'h.0.attn'): ";
  EXPECT_EQ(attention_refusal(attention_desc({1, 4, 8, 16}, {1, 3, 8, 16}, {1, 3, 8, 16})),
            where + "the key/value heads (3) must divide the query heads (4)");
  EXPECT_EQ(attention_refusal(attention_desc({1, 4, 8, 16}, {1, 4, 8, 8}, {1, 4, 8, 16})),
            where +
                "k f32[1,4,8,8] and v f32[1,4,8,16] do not match q f32[1,4,8,16] ([B,H,T,D], [B,G,S,D], " +
                "[B,G,S,E])");
  EXPECT_EQ(
      attention_refusal(attention_desc({1, 4, 8}, {1, 4, 8, 16}, {1, 4, 8, 16})),
      where + "q f32[1,4,8], k f32[1,4,8,16] and v f32[1,4,8,16] must be [B,H,T,D], [B,G,S,D], [B,G,S,E]");

  Desc layout = attention_desc({1, 4, 8, 16}, {1, 4, 8, 16}, {1, 4, 8, 16});
  set_string(layout, "layout", "bdht");
  EXPECT_EQ(attention_refusal(layout), where + "attribute 'layout' must be bhtd/bthd, got \"bdht\"");
  Desc dropout = attention_desc({1, 4, 8, 16}, {1, 4, 8, 16}, {1, 4, 8, 16});
  set_float(dropout, "dropout", 1.0);
  EXPECT_EQ(attention_refusal(dropout), where + "attribute 'dropout' must be in [0, 1), got 1.000000");
  Desc scale = attention_desc({1, 4, 8, 16}, {1, 4, 8, 16}, {1, 4, 8, 16});
  set_float(scale, "scale", std::numeric_limits<double>::infinity());
  EXPECT_EQ(attention_refusal(scale), where + "attribute 'scale' must be finite, got inf");
  Desc mask = attention_desc({2, 4, 8, 16}, {2, 4, 8, 16}, {2, 4, 8, 16});
  mask.in_dims.push_back({2, 8});
  mask.in_types.push_back(TDM_F32);
  EXPECT_EQ(attention_refusal(mask), where + "key_padding_mask f32[2,8] must be u8[2,8]");
  Desc mixed = attention_desc({1, 4, 8, 16}, {1, 4, 8, 16}, {1, 4, 8, 16});
  mixed.in_types[2] = TDM_BF16;
  EXPECT_EQ(attention_refusal(mixed), where + "q, k and v must have one dtype");
}

TEST(Half, EveryPatternRoundTripsThroughF32AndF64) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = uint16_t(i);
    if (is_nan16(h, 10)) {
      EXPECT_TRUE(std::isnan(tandem::f16_to_f32(h)));
      EXPECT_TRUE(is_nan16(tandem::f32_to_f16(tandem::f16_to_f32(h)), 10));
    } else {
      ASSERT_EQ(tandem::f32_to_f16(tandem::f16_to_f32(h)), h) << std::hex << i;
      ASSERT_EQ(tandem::f64_to_f16(double(tandem::f16_to_f32(h))), h) << std::hex << i;
    }
    if (is_nan16(h, 7)) {
      EXPECT_TRUE(is_nan16(tandem::f32_to_bf16(tandem::bf16_to_f32(h)), 7));
      EXPECT_TRUE(is_nan16(tandem::f64_to_bf16(double(tandem::bf16_to_f32(h))), 7));
    } else {
      ASSERT_EQ(tandem::f32_to_bf16(tandem::bf16_to_f32(h)), h) << std::hex << i;
      ASSERT_EQ(tandem::f64_to_bf16(double(tandem::bf16_to_f32(h))), h) << std::hex << i;
    }
  }
}

TEST(Half, F32ToF16MatchesTheCompilersFloat16) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, sizeof f);
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &h, sizeof want);
    const uint16_t got = tandem::f32_to_f16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(is_nan16(got, 10)) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(got, want) << std::hex << bits;
    // From f64 the same, for every f32 value (exact in f64).
    ASSERT_EQ(tandem::f64_to_f16(double(f)), want) << std::hex << bits;
  }
}

TEST(Half, SpecialValues) {
  EXPECT_EQ(tandem::f32_to_f16(65504.f), 0x7bff);
  EXPECT_EQ(tandem::f32_to_f16(65520.f), 0x7c00);  // the tie above the largest finite: infinity
  EXPECT_EQ(tandem::f32_to_f16(-0.f), 0x8000);
  EXPECT_EQ(tandem::f32_to_f16(std::ldexp(1.f, -24)), 0x0001);
  EXPECT_EQ(tandem::f32_to_f16(std::ldexp(1.f, -25)), 0x0000);  // tie: to even (zero)
  EXPECT_EQ(tandem::f32_to_f16(std::ldexp(3.f, -25)), 0x0002);  // tie: to even (2)
  EXPECT_EQ(tandem::f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(tandem::f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(tandem::f64_to_bf16(1e300), 0x7f80);
  EXPECT_EQ(tandem::f64_to_f16(-1e-300), 0x8000);
  EXPECT_EQ(tandem::f64_to_bf16(std::ldexp(1.0, -133)), 0x0001);  // the smallest bf16 subnormal
  EXPECT_TRUE(is_nan16(tandem::f64_to_bf16(std::nan("")), 7));
  EXPECT_EQ(tandem::f16_to_f32(0x0001), std::ldexp(1.f, -24));
  EXPECT_EQ(tandem::bf16_to_f32(0x3f80), 1.f);
}

TEST(Half, F64RoundsOnceNotTwice) {
  // Just above the tie between two 16-bit neighbours, by less than f32 can
  // hold: rounding to f32 first would land on the tie and then go to even.
  const double above_bf16_tie = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  EXPECT_EQ(tandem::f32_to_bf16(float(above_bf16_tie)), 0x3f80);  // the double rounding
  EXPECT_EQ(tandem::f64_to_bf16(above_bf16_tie), 0x3f81);
  const double above_f16_tie = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(tandem::f64_to_f16(above_f16_tie), 0x3c01);
  const double below_f16_tie = 1.0 + std::ldexp(3.0, -11) - std::ldexp(1.0, -40);
  EXPECT_EQ(tandem::f64_to_f16(below_f16_tie), 0x3c01);
  EXPECT_EQ(tandem::f64_to_f16(1.0 + std::ldexp(3.0, -11)), 0x3c02);  // the tie itself: to even
}

}  // namespace
