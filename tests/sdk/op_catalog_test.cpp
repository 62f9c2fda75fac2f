// sdk.op_catalog: the catalog as data (tandem/op_catalog.hpp) — every entry
// parses and resolves — and the checks a backend's kernels get from it
// through the kit's registry: operand counts, attribute types, valid values
// and finiteness, and the defaults Check hands out.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "op_desc.hpp"
#include "tandem/backend_kit.hpp"
#include "tandem/op_catalog.hpp"

namespace {

namespace catalog = tandem::catalog;
using tandem::OpView;

TEST(OpCatalog, EveryEntryParsesAndItsNamesResolve) {
  std::set<std::string> names;
  for (const catalog::Op& op : catalog::ops()) {
    SCOPED_TRACE(op.name);
    EXPECT_TRUE(names.insert(op.name).second);
    EXPECT_FALSE(op.section.empty());
    EXPECT_FALSE(op.outputs.empty());
    for (const std::string& g : op.grad_ops) EXPECT_NE(catalog::find(g), nullptr) << "gradient op " << g;
    for (const catalog::InplacePair& p : op.inplace) {
      EXPECT_LT(p.out, op.outputs.size());
      EXPECT_LT(p.in, op.inputs.size());
    }
    for (const catalog::Attribute& a : op.attrs) {
      if (a.kind == catalog::Attribute::Default::literal && a.type == TDM_ATTR_STRING && !a.choices.empty()) {
        EXPECT_EQ(std::set<std::string>(a.choices.begin(), a.choices.end()).count(a.default_text), 1u)
            << a.name;
      }
    }
    // A gradient op's attributes are its forward's (it reads the same node's).
    if (!op.grad_ops.empty() && op.section == "activation") {
      EXPECT_EQ(catalog::find(op.grad_ops[0])->attrs.size(), op.attrs.size());
    }
  }
  EXPECT_EQ(catalog::find("frobnicate"), nullptr);
}

TEST(OpCatalog, OperandsCarryOptionalityVariadicsAndFixedDtypes) {
  const catalog::Op& attention = *catalog::find("attention");
  EXPECT_EQ(attention.min_inputs(), 3u);
  EXPECT_EQ(attention.max_inputs(), 5u);
  EXPECT_EQ(attention.outputs[1].name, "lse");
  EXPECT_EQ(attention.outputs[1].fixed_dtype, TDM_F32);
  EXPECT_EQ(catalog::fixed_f32_mask(attention.outputs), 2u);
  EXPECT_EQ(catalog::find("concat")->max_inputs(), SIZE_MAX);
  EXPECT_TRUE(catalog::find("leaky_relu")->is(TDM_OP_AMP_LOW | TDM_OP_ELEMENTWISE));
  EXPECT_TRUE(catalog::find("max_pool2d")->is(TDM_OP_AMP_BF16));
  EXPECT_FALSE(catalog::find("softmax")->is(TDM_OP_AMP_LOW | TDM_OP_AMP_BF16));
  const catalog::Attribute& p = *catalog::find("dropout")->attr("p");
  EXPECT_EQ(p.type, TDM_ATTR_FLOAT);
  EXPECT_DOUBLE_EQ(p.float_default, 0.5);
  EXPECT_EQ(catalog::detail::range_text(p), "in [0, 1]");
  EXPECT_EQ(catalog::find("conv2d_grad_weight")->attrs.size(), 5u);  // @conv2d and has_bias
  // "0..<1": the upper end excluded (AdamW's betas: 1 would divide by zero).
  const catalog::Attribute& beta1 = *catalog::find("adamw_update")->attr("beta1");
  EXPECT_EQ(catalog::detail::range_text(beta1), "in [0, 1)");
  tdm_attr one{};
  one.struct_size = sizeof one;
  one.name = "beta1";
  one.type = TDM_ATTR_FLOAT;
  one.f = 1.0;
  EXPECT_EQ(catalog::attribute_error(beta1, one), "attribute 'beta1' must be in [0, 1), got 1.000000");
  one.f = 0.999;
  EXPECT_EQ(catalog::attribute_error(beta1, one), "");
}

std::unique_ptr<tandem::Kernel> slope_kernel(const OpView& op, size_t&) {
  const tandem::Check c(op, "mine");
  const float slope = static_cast<float>(c.float_attr("negative_slope"));  // the catalog's default
  return tandem::make_fn_kernel("mine:" + std::to_string(slope), [](void* const*, void* const*) {});
}

Desc leaky_relu_desc(std::vector<tdm_attr> attrs = {}) {
  Desc d;
  d.op = "leaky_relu";
  d.in_dims = {{4}};
  d.in_types = {TDM_F32};
  d.out_dims = {{4}};
  d.out_types = {TDM_F32};
  d.attrs = std::move(attrs);
  return d;
}

tdm_attr float_attr(const char* name, double v) {
  tdm_attr a = attr(name, TDM_ATTR_FLOAT);
  a.f = v;
  return a;
}

TEST(OpCatalog, TheRegistryChecksCountsAndAttributesBeforeTheFactory) {
  tandem::KernelRegistry<> registry("mine");
  registry.add("leaky_relu", slope_kernel);
  size_t ws = 0;
  Desc plain = leaky_relu_desc();
  EXPECT_STREQ(registry.prepare(OpView(plain.get()), ws)->describe(), "mine:0.010000");

  Desc two_inputs = leaky_relu_desc();
  two_inputs.in_dims.push_back({4});
  two_inputs.in_types.push_back(TDM_F32);
  Thrown t = thrown([&] { registry.prepare(OpView(two_inputs.get()), ws); });
  EXPECT_EQ(t.status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(t.message, "mine: op 'leaky_relu': expected 1 inputs, got 2");

  Desc nan = leaky_relu_desc({float_attr("negative_slope", std::nan(""))});
  t = thrown([&] { registry.prepare(OpView(nan.get()), ws); });
  EXPECT_EQ(t.status, TDM_INVALID_ARGUMENT);
  EXPECT_NE(t.message.find("attribute 'negative_slope' must be finite"), std::string::npos) << t.message;

  tdm_attr text = float_attr("negative_slope", 0);
  text.type = TDM_ATTR_STRING;
  text.s = "steep";
  Desc wrong_type = leaky_relu_desc({text});
  t = thrown([&] { registry.prepare(OpView(wrong_type.get()), ws); });
  EXPECT_NE(t.message.find("attribute 'negative_slope' must be a float"), std::string::npos) << t.message;
}

TEST(OpCatalog, StringChoicesAndRangesAreNamedInTheMessage) {
  tandem::KernelRegistry<> registry("mine");
  registry.add("gelu", [](const OpView&, size_t&) -> std::unique_ptr<tandem::Kernel> { return nullptr; });
  registry.add("dropout", [](const OpView&, size_t&) -> std::unique_ptr<tandem::Kernel> { return nullptr; });
  size_t ws = 0;
  tdm_attr approx = attr("approximate", TDM_ATTR_STRING);
  approx.s = "fast";
  Desc gelu = leaky_relu_desc({approx});
  gelu.op = "gelu";
  Thrown t = thrown([&] { registry.prepare(OpView(gelu.get()), ws); });
  EXPECT_EQ(t.message, "mine: op 'gelu': attribute 'approximate' must be none/tanh, got \"fast\"");

  Desc dropout = leaky_relu_desc({float_attr("p", 1.5)});
  dropout.op = "dropout";
  dropout.out_dims.push_back({4});
  dropout.out_types.push_back(TDM_U8);
  t = thrown([&] { registry.prepare(OpView(dropout.get()), ws); });
  EXPECT_EQ(t.message, "mine: op 'dropout': attribute 'p' must be in [0, 1], got 1.500000");
}

}  // namespace
