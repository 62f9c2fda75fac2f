// The host's op table (host/ops/) against the catalog: every catalog op has
// one entry, in the file its section names; every gradient op a rule emits
// and every in-place slot resolves; and every shape rule gives, for every
// case of the conformance kit, the outputs that case declares (the kit's
// cases are what the reference backend accepts), so the host and the
// backends agree on every shape.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "ops/op_table.hpp"
#include "ops/shapes.hpp"
#include "tandem/conformance/cases.hpp"
#include "tandem/op_shapes.hpp"

namespace tandem::test {
namespace {

namespace ops = host::ops;
namespace tc = tandem::conformance;
using host::Attr;
using host::TensorType;

// The file stems of sdk/ops.md's "Sections and the files that implement them".
std::set<std::string> catalog_stems() {
  std::ifstream in(TANDEM_OPS_MD);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const size_t start = s.find("## Sections and the files that implement them");
  const size_t end = s.find("\n## ", start + 1);
  std::set<std::string> stems;
  const std::string table = s.substr(start, end - start);
  const std::regex row("\\| `([a-z0-9_]+)` \\|");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), row); it != std::sregex_iterator(); ++it)
    stems.insert((*it)[1]);
  return stems;
}

TEST(OpTable, EveryCatalogOpHasOneEntryInItsSectionsFile) {
  const std::set<std::string> stems = catalog_stems();
  ASSERT_EQ(stems.size(), 24u) << "sdk/ops.md's section table";
  std::set<std::string> catalog(tc::catalog_ops().begin(), tc::catalog_ops().end());
  for (const std::string& op : catalog) {
    const ops::OpInfo* info = ops::find(op);
    ASSERT_NE(info, nullptr) << op << " is in the catalog but not in the host's op table";
    EXPECT_EQ(stems.count(std::string(info->section)), 1u) << op << ": section " << info->section;
  }
  std::set<std::string> names;
  for (const ops::OpInfo& info : ops::op_table()) {
    EXPECT_TRUE(names.insert(std::string(info.name)).second) << info.name << " has two entries";
    if (info.is(ops::kHostRun)) continue;
    EXPECT_EQ(catalog.count(std::string(info.name)), 1u) << info.name << " is not a catalog op";
  }
}

TEST(OpTable, GradientOpsAndInPlaceSlotsResolve) {
  for (const ops::OpInfo& info : ops::op_table()) {
    for (std::string_view g : info.grad_ops) EXPECT_NE(ops::find(g), nullptr) << info.name << " emits " << g;
    EXPECT_EQ(info.grad == nullptr, !info.no_grad.empty()) << info.name << ": a rule, or a reason for none";
    for (const ops::InplacePair& p : info.inplace) {
      EXPECT_LT(p.out, info.outputs.size()) << info.name;
      EXPECT_LT(p.in, info.inputs.size()) << info.name;
    }
    if (info.is(ops::kOptimizer)) {
      EXPECT_EQ(info.gradient_input, 1) << info.name;
    }
  }
}

// sgd_update without momentum has no buffer: its second pair binds nothing,
// and a pass cannot ask for a pair the catalog does not allow.
TEST(OpTable, InPlacePairsOnlyForPresentAllowedSlots) {
  host::Node sgd;
  sgd.op = "sgd_update";
  sgd.inputs = {1, 2, 3};
  sgd.outputs = {4};
  EXPECT_EQ(ops::inplace_pairs(sgd), (std::vector<std::pair<size_t, size_t>>{{0, 0}}));
  sgd.inputs.push_back(5);
  sgd.outputs.push_back(6);
  EXPECT_EQ(ops::inplace_pairs(sgd), (std::vector<std::pair<size_t, size_t>>{{0, 0}, {1, 3}}));
  host::Node relu;
  relu.op = "relu";
  relu.inputs = {1};
  relu.outputs = {2};
  relu.annotations["tandem.inplace"] = "0:0";
  EXPECT_TRUE(ops::inplace_pairs(relu).empty()) << "the catalog does not let relu run in place";
  host::Node add = relu;
  add.op = "add";
  add.inputs = {1, 3};
  EXPECT_EQ(ops::inplace_pairs(add), (std::vector<std::pair<size_t, size_t>>{{0, 0}}));
}

TEST(OpTable, BroadcastingIsNumpys) {
  EXPECT_EQ(*tandem::shapes::broadcast({0}, {1}), (ops::Dims{0}));
  EXPECT_EQ(*tandem::shapes::broadcast({1}, {0}), (ops::Dims{0}));
  EXPECT_EQ(*tandem::shapes::broadcast({2, 1, 3}, {4, 1}), (ops::Dims{2, 4, 3}));
  EXPECT_EQ(*tandem::shapes::broadcast({}, {5}), (ops::Dims{5}));
  EXPECT_FALSE(tandem::shapes::broadcast({2}, {3}).has_value());
  EXPECT_EQ(ops::broadcast_axes({3}, {2, 3}), (std::vector<int64_t>{0}));
  EXPECT_EQ(ops::broadcast_axes({2, 1}, {2, 3}), (std::vector<int64_t>{1}));
}

std::vector<Attr> host_attrs(const tc::Attrs& attrs) {
  std::vector<Attr> out;
  for (const tdm_attr& a : attrs.view()) {
    Attr h{a.name, int64_t{0}};
    if (a.type == TDM_ATTR_INT) h.value = a.i;
    if (a.type == TDM_ATTR_FLOAT) h.value = a.f;
    if (a.type == TDM_ATTR_STRING) h.value = std::string(a.s);
    if (a.type == TDM_ATTR_INTS) h.value = std::vector<int64_t>(a.ints, a.ints + a.count);
    if (a.type == TDM_ATTR_FLOATS) h.value = std::vector<double>(a.floats, a.floats + a.count);
    out.push_back(std::move(h));
  }
  return out;
}

TEST(OpTable, ShapeRulesGiveEveryConformanceCasesOutputs) {
  size_t checked = 0;
  for (const tc::Case& c : tc::catalogue()) {
    SCOPED_TRACE(c.op + " " + c.label());
    const ops::OpInfo* info = ops::find(c.op);
    ASSERT_NE(info, nullptr);
    ASSERT_NE(tandem::shapes::rule(c.op), nullptr) << "every catalog op has a shape rule";
    ops::ShapeQuery q;
    for (const tc::InputSpec& in : c.inputs)
      q.inputs.push_back(in.shape.dtype == TDM_DTYPE_INVALID
                             ? std::nullopt
                             : std::optional<TensorType>({in.shape.dtype, in.shape.dims}));
    const std::vector<Attr> attrs = host_attrs(c.attrs);
    q.attrs = &attrs;
    std::vector<TensorType> declared;
    for (const TensorShape& o : c.outputs) declared.push_back({o.dtype, o.dims});
    q.declared = declared;
    auto got = ops::infer(c.op, q);
    ASSERT_TRUE(got.ok()) << got.error().message;
    for (size_t j = 0; j < declared.size(); ++j) {
      if (declared[j].dtype == TDM_DTYPE_INVALID) continue;  // an absent optional output
      ASSERT_LT(j, got->size());
      EXPECT_EQ((*got)[j].dtype, declared[j].dtype) << "output " << j;
      EXPECT_EQ((*got)[j].dims, declared[j].dims) << "output " << j;
    }
    ++checked;
  }
  EXPECT_GT(checked, 1000u);
}

TEST(OpTable, ShapeErrorsNameTheOpAndTheShapes) {
  ops::ShapeQuery q;
  q.inputs = {TensorType{TDM_F32, {4, 3}}, TensorType{TDM_F32, {5, 2}}};
  auto r = ops::infer("linear", q);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("op 'linear': x f32[4,3] and w f32[5,2] must be [N, I] and [O, I]"),
            std::string::npos)
      << r.error().message;
  q.inputs = {TensorType{TDM_F32, {2}}, TensorType{TDM_F32, {3}}};
  r = ops::infer("add", q);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("do not broadcast"), std::string::npos) << r.error().message;
}

// Every node the host builds or a pass inserts has its attributes checked
// against the catalog, whatever kit its backend uses.
TEST(OpTable, AttributesAreCheckedAgainstTheCatalog) {
  ops::ShapeQuery q;
  q.inputs = {TensorType{TDM_F32, {4}}, std::nullopt};
  std::vector<Attr> attrs = {{"p", 1.5}};
  q.attrs = &attrs;
  auto r = ops::infer("dropout", q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "op 'dropout': attribute 'p' must be in [0, 1], got 1.500000");
  attrs = {{"p", std::string("half")}};
  r = ops::infer("dropout", q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "op 'dropout': attribute 'p' must be a float");
  q.inputs = {TensorType{TDM_F32, {1, 1, 4, 4}}};
  attrs.clear();
  r = ops::infer("max_pool2d", q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "op 'max_pool2d': attribute 'kernel' is required");
  attrs = {{"kernel", std::vector<int64_t>{2, 2}}};
  EXPECT_TRUE(ops::infer("max_pool2d", q).ok());
}

// A product of bf16 operands writes bf16 unless the node declares f32
// (ops.md "Wide outputs"); then its bias is f32 too.
TEST(OpTable, WideOutputsOnlyWhereDeclared) {
  ops::ShapeQuery q;
  q.inputs = {TensorType{TDM_BF16, {4, 3}}, TensorType{TDM_BF16, {5, 3}}};
  auto r = ops::infer("linear", q);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)[0].dtype, TDM_BF16);
  const std::vector<TensorType> wide = {TensorType{TDM_F32, {4, 5}}};
  q.declared = wide;
  r = ops::infer("linear", q);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)[0].dtype, TDM_F32);
  q.inputs.push_back(TensorType{TDM_BF16, {5}});
  r = ops::infer("linear", q);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("the output's dtype"), std::string::npos) << r.error().message;
  // f32 operands cannot declare a narrower output, and mixed operands are refused.
  q.inputs = {TensorType{TDM_F32, {4, 3}}, TensorType{TDM_BF16, {5, 3}}};
  r = ops::infer("linear", q);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("must have one dtype"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace tandem::test
