// sdk.op_shapes: every catalog op's shape rule (tandem/op_shapes.hpp) —
// each op has one, the rules give the outputs sdk/ops.md documents, and
// the kit's registry runs them before a backend's factory, so a kernel
// never sees operands that disagree or outputs its inputs do not give.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "op_desc.hpp"
#include "tandem/backend_kit.hpp"
#include "tandem/op_shapes.hpp"

namespace {

namespace catalog = tandem::catalog;
namespace shapes = tandem::shapes;
using tandem::OpView;
using tandem::TensorShape;

TEST(OpShapes, EveryCatalogOpHasARule) {
  for (const catalog::Op& op : catalog::ops()) EXPECT_NE(shapes::rule(op.name), nullptr) << op.name;
  EXPECT_EQ(shapes::rule("frobnicate"), nullptr);
}

// The outputs of `op` over `inputs` (dtype TDM_DTYPE_INVALID: absent),
// or "error: <message>".
std::string infer(const char* op, const std::vector<TensorShape>& inputs, std::vector<tdm_attr> attrs = {},
                  const std::vector<TensorShape>& declared = {}) {
  std::vector<const TensorShape*> present;
  for (const TensorShape& t : inputs) present.push_back(t.dtype == TDM_DTYPE_INVALID ? nullptr : &t);
  try {
    const shapes::Outputs outs =
        shapes::infer(shapes::Query(*catalog::find(op), present, attrs.data(), attrs.size(), declared));
    std::string s;
    for (const TensorShape& t : outs) s += (s.empty() ? "" : " ") + t.str();
    return s;
  } catch (const shapes::Invalid& e) {
    return std::string("error: ") + e.what();
  }
}

tdm_attr int_attr(const char* name, int64_t v) {
  tdm_attr a = attr(name, TDM_ATTR_INT);
  a.i = v;
  return a;
}

tdm_attr string_attr(const char* name, const char* v) {
  tdm_attr a = attr(name, TDM_ATTR_STRING);
  a.s = v;
  return a;
}

const TensorShape kAbsent(TDM_DTYPE_INVALID, {});

TEST(OpShapes, RulesGiveTheDocumentedOutputs) {
  EXPECT_EQ(infer("linear", {{TDM_F32, {4, 3}}, {TDM_F32, {5, 3}}, kAbsent}), "f32[4,5]");
  EXPECT_EQ(infer("linear", {{TDM_F32, {4, 3}}, {TDM_F32, {5, 4}}}),
            "error: x f32[4,3] and w f32[5,4] must be [N, I] and [O, I]");
  // A product's f32 output over bf16 operands when the caller declares it.
  EXPECT_EQ(infer("linear", {{TDM_BF16, {4, 3}}, {TDM_BF16, {5, 3}}}, {}, {{TDM_F32, {4, 5}}}), "f32[4,5]");
  EXPECT_EQ(infer("matmul", {{TDM_F32, {7, 1, 2, 3}}, {TDM_F32, {6, 3, 4}}}), "f32[7,6,2,4]");
  EXPECT_EQ(infer("matmul", {{TDM_F32, {3, 2}}, {TDM_F32, {3, 4}}}, {int_attr("transpose_a", 1)}),
            "f32[2,4]");
  EXPECT_EQ(infer("linear_grad_weight", {{TDM_F32, {4, 5}}, {TDM_F32, {4, 3}}}), "f32[5,3] f32[5]");
  EXPECT_EQ(infer("linear_grad_weight", {{TDM_F32, {4, 5}}, {TDM_F32, {4, 3}}}, {int_attr("has_bias", 0)}),
            "f32[5,3]");
  EXPECT_EQ(infer("add", {{TDM_F32, {2, 1, 3}}, {TDM_F32, {4, 1}}}), "f32[2,4,3]");
  EXPECT_EQ(infer("add", {{TDM_F32, {2}}, {TDM_F32, {3}}}), "error: a f32[2] and b f32[3] do not broadcast");
  // One rule serves the whole activation section, a gradient op included.
  EXPECT_EQ(infer("softplus", {{TDM_BF16, {2, 3}}}), "bf16[2,3]");
  EXPECT_EQ(infer("softplus_grad", {{TDM_F32, {2, 3}}, {TDM_F32, {3, 2}}}).rfind("error: ", 0), 0u);
  EXPECT_EQ(
      infer("attention", {{TDM_BF16, {2, 8, 5, 16}}, {TDM_BF16, {2, 2, 7, 16}}, {TDM_BF16, {2, 2, 7, 4}}}),
      "bf16[2,8,5,4] f32[2,8,5]");
  EXPECT_EQ(infer("attention", {{TDM_F32, {2, 5, 8, 16}}, {TDM_F32, {2, 7, 2, 16}}, {TDM_F32, {2, 7, 2, 4}}},
                  {string_attr("layout", "bthd")}),
            "f32[2,5,8,4] f32[2,8,5]");
  EXPECT_EQ(
      infer("max_pool2d", {{TDM_F32, {1, 3, 8, 8}}}, {attr("kernel", TDM_ATTR_INTS)}).rfind("error: ", 0),
      0u);
  EXPECT_EQ(infer("reshape", {{TDM_F32, {2, 6}}}, {}, {{TDM_F32, {3, 4}}}), "f32[3,4]");
  EXPECT_EQ(infer("reshape", {{TDM_F32, {2, 6}}}).rfind("error: output 0 must be given", 0), 0u);
}

tdm_attr float_attr(const char* name, double v) {
  tdm_attr a = attr(name, TDM_ATTR_FLOAT);
  a.f = v;
  return a;
}

// What the operands and attributes must agree on beyond dims, so that no
// backend repeats it: sdk/ops.md's conditions between an op's attributes
// and its operands.
TEST(OpShapes, RulesCheckWhatAttributesAndOperandsMustAgreeOn) {
  const TensorShape p(TDM_F32, {3}), lr(TDM_F32, {});
  EXPECT_EQ(infer("sgd_update", {p, p, lr, p}, {float_attr("momentum", 0.9)}), "f32[3] f32[3]");
  EXPECT_EQ(infer("sgd_update", {p, p, lr}, {float_attr("momentum", 0.9)})
                .rfind("error: momentum_buf (input 3)", 0),
            0u);
  EXPECT_EQ(infer("sgd_update", {p, p, lr, p},
                  {float_attr("momentum", 0.9), int_attr("nesterov", 1), float_attr("dampening", 0.1)}),
            "error: nesterov needs momentum > 0 and dampening = 0");
  // Every input whose dtype the catalog does not fix has the data's dtype.
  EXPECT_EQ(infer("sgd_update", {p, {TDM_BF16, {3}}, lr}), "error: grad bf16[3] must be f32, param's dtype");
  EXPECT_EQ(infer("sgd_update", {p, p, {TDM_S32, {}}}), "error: lr s32[] must be f32");
  EXPECT_EQ(infer("embedding", {{TDM_F32, {5, 2}}, {TDM_S32, {4}}}, {int_attr("padding_idx", 5)}),
            "error: padding_idx 5 is not a row of a table with 5 rows");
  EXPECT_EQ(infer("batch_norm_train",
                  {{TDM_F32, {1, 2}}, {TDM_F32, {2}}, {TDM_F32, {2}}, {TDM_F32, {2}}, {TDM_F32, {2}}}),
            "error: training needs at least 2 values per channel, x is f32[1,2]");
  EXPECT_EQ(infer("layer_norm_grad",
                  {{TDM_F32, {2, 3}}, {TDM_F32, {2, 3}}, {TDM_F32, {3}}, {TDM_F32, {2}}, {TDM_F32, {3}}}),
            "error: rstd f32[3] must be f32[2]");
  tdm_attr w_scale = attr("w_scale", TDM_ATTR_FLOATS);
  const double scales[] = {0.5, 0.25};
  w_scale.floats = scales;
  w_scale.count = 2;
  EXPECT_EQ(infer("linear_int8", {{TDM_U8, {2, 4}}, {TDM_S8, {3, 4}}}, {float_attr("x_scale", 0.1), w_scale}),
            "error: w_scale has 2 entries; expected 1 or N = 3");
  EXPECT_EQ(infer("linear_int8", {{TDM_U8, {2, 70000}}, {TDM_S8, {2, 70000}}},
                  {float_attr("x_scale", 0.1), w_scale})
                .rfind("error: the reduction of 70000 products exceeds 65536", 0),
            0u);
  tdm_attr scale = attr("scale", TDM_ATTR_FLOATS);
  scale.floats = scales;
  scale.count = 2;
  EXPECT_EQ(infer("quantize", {{TDM_F32, {4, 2}}}, {scale, int_attr("axis", 1)}, {{TDM_U8, {4, 2}}}),
            "u8[4,2]");
  EXPECT_EQ(infer("quantize", {{TDM_F32, {4, 3}}}, {scale, int_attr("axis", 1)}, {{TDM_U8, {4, 3}}}),
            "error: scale has 2 entries but dim 1 of [4,3] is 3");
  EXPECT_EQ(infer("fake_quant", {{TDM_F32, {4}}}, {int_attr("quant_min", 10), int_attr("quant_max", 5)}),
            "error: need -128 <= quant_min < quant_max <= 255, got 10, 5");
}

std::unique_ptr<tandem::Kernel> any_linear(const OpView&, size_t&) {
  return tandem::make_fn_kernel("mine:linear", [](void* const*, void* const*) {});
}

Desc linear_desc(std::vector<int64_t> w, std::vector<int64_t> y) {
  Desc d;
  d.op = "linear";
  d.node = "fc1";
  d.in_dims = {{4, 3}, std::move(w)};
  d.in_types = {TDM_F32, TDM_F32};
  d.out_dims = {std::move(y)};
  d.out_types = {TDM_F32};
  return d;
}

TEST(OpShapes, TheRegistryRunsTheRuleBeforeTheFactory) {
  tandem::KernelRegistry<> registry("mine");
  registry.add("linear", any_linear);
  size_t ws = 0;
  Desc right = linear_desc({5, 3}, {4, 5});
  EXPECT_STREQ(registry.prepare(OpView(right.get()), ws)->describe(), "mine:linear");

  Desc wrong_weight = linear_desc({5, 4}, {4, 5});
  Thrown t = thrown([&] { registry.prepare(OpView(wrong_weight.get()), ws); });
  EXPECT_EQ(t.status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(t.message, "mine: op 'linear' (node 'fc1'): x f32[4,3] and w f32[5,4] must be [N, I] and [O, I]");

  Desc wrong_output = linear_desc({5, 3}, {4, 6});
  t = thrown([&] { registry.prepare(OpView(wrong_output.get()), ws); });
  EXPECT_EQ(t.status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(t.message,
            "mine: op 'linear' (node 'fc1'): output 0 is declared f32[4,6] but its inputs give f32[4,5]");

  Desc wrong_dtype = linear_desc({5, 3}, {4, 5});
  wrong_dtype.out_types = {TDM_F16};
  t = thrown([&] { registry.prepare(OpView(wrong_dtype.get()), ws); });
  EXPECT_EQ(t.message,
            "mine: op 'linear' (node 'fc1'): output 0 is declared f16[4,5] but its inputs give f32[4,5]");
}

TEST(OpShapes, AnOptionalOutputMayBeAbsentOnlyWhenTheRuleGivesNone) {
  tandem::KernelRegistry<> registry("mine");
  registry.add("linear_grad_weight", any_linear);
  size_t ws = 0;
  Desc d;
  d.op = "linear_grad_weight";
  d.in_dims = {{4, 5}, {4, 3}};
  d.in_types = {TDM_F32, TDM_F32};
  d.out_dims = {{5, 3}, {}};
  d.out_types = {TDM_F32, TDM_DTYPE_INVALID};
  d.attrs = {int_attr("has_bias", 0)};
  EXPECT_NO_THROW(registry.prepare(OpView(d.get()), ws));
  d.attrs = {};  // has_bias defaults to 1: dbias is then required
  const Thrown t = thrown([&] { registry.prepare(OpView(d.get()), ws); });
  EXPECT_EQ(t.message, "mine: op 'linear_grad_weight': output 1 is absent but its inputs give f32[5]");
}

}  // namespace
