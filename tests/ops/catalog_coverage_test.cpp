// Every op-keyed table against the catalog (tandem/op_catalog.hpp): each
// catalog op has an entry in every table, or the table says why it has
// none. A table that misses an op fails here, naming the op and the table,
// instead of drifting (an error message that omits an activation, an op
// that exports nowhere).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "export/onnx_coverage.hpp"
#include "model/layer_schema.hpp"
#include "ops/op_table.hpp"
#include "tandem/conformance/cases.hpp"
#include "tandem/conformance/compare.hpp"
#include "tandem/op_catalog.hpp"
#include "tandem/op_shapes.hpp"

namespace tandem::test {
namespace {

namespace catalog = tandem::catalog;

// Autodiff, the optimizer and the host emit these; no table keyed by
// what a model contains lists them.
bool emitted_by_the_host(const catalog::Op& op) {
  return op.is(TDM_OP_GRADIENT) || op.is(TDM_OP_OPTIMIZER);
}

TEST(CatalogCoverage, EveryOpHasAnAmpClassAndAToleranceClass) {
  for (const catalog::Op& op : catalog::ops()) {
    EXPECT_NE(op.entry->amp, catalog::Amp::unset) << op.name << ": no class under mixed precision";
    EXPECT_NE(op.entry->tolerance, catalog::Tolerance::unset)
        << op.name << ": no conformance tolerance class";
  }
}

TEST(CatalogCoverage, EveryOpHasTheHostsRules) {
  for (const catalog::Op& op : catalog::ops()) {
    const host::ops::OpInfo* info = host::ops::find(op.name);
    ASSERT_NE(info, nullptr) << op.name << ": not in the host's op table";
    EXPECT_NE(tandem::shapes::rule(op.name), nullptr) << op.name << ": no shape rule in the SDK";
  }
}

TEST(CatalogCoverage, EveryOpExportsToOnnxOrSaysWhyNot) {
  const std::vector<std::string> names = host::exporting::converted_ops();
  const std::set<std::string> converters(names.begin(), names.end());
  const auto& declared = host::exporting::not_exported();
  for (const catalog::Op& op : catalog::ops()) {
    if (emitted_by_the_host(op)) continue;
    const bool converted = converters.count(op.name) > 0, excused = declared.count(op.name) > 0;
    EXPECT_TRUE(converted || excused)
        << op.name << ": no ONNX converter (host/export) and no reason in not_exported()";
    EXPECT_FALSE(converted && excused) << op.name << ": has a converter and a reason not to export";
  }
  for (const auto& [name, why] : declared)
    EXPECT_NE(catalog::find(name), nullptr) << name << ": not a catalog op";
}

TEST(CatalogCoverage, EveryOpIsAModelFileLayerOrSaysHowItEntersAGraph) {
  const auto& declared = host::model::ops_without_a_layer();
  for (const catalog::Op& op : catalog::ops()) {
    if (emitted_by_the_host(op)) continue;
    const bool layer = host::model::find_layer_schema(op.name) != nullptr,
               excused = declared.count(op.name) > 0;
    EXPECT_TRUE(layer || excused) << op.name
                                  << ": no model-file layer kind and no line in ops_without_a_layer()";
    EXPECT_FALSE(layer && excused) << op.name << ": a layer kind and declared without one";
  }
  for (const auto& [name, why] : declared)
    EXPECT_NE(catalog::find(name), nullptr) << name << ": not a catalog op";
}

TEST(CatalogCoverage, EveryOpHasConformanceCases) {
  std::set<std::string> covered;
  for (const conformance::Case& c : conformance::catalogue()) covered.insert(c.op);
  for (const catalog::Op& op : catalog::ops())
    EXPECT_EQ(covered.count(op.name), 1u) << op.name << ": no case";
}

TEST(CatalogCoverage, ActivationsAreLayersWithTheCatalogsAttributes) {
  for (const catalog::Op& op : catalog::ops()) {
    if (op.section != "activation" || op.is(TDM_OP_GRADIENT)) continue;
    const host::model::LayerSchema* layer = host::model::find_layer_schema(op.name);
    ASSERT_NE(layer, nullptr) << op.name;
    EXPECT_FALSE(layer->summary.empty())
        << op.name << ": the catalog entry has no summary (the layer kind says what it computes)";
    ASSERT_EQ(layer->attrs.size(), op.attrs.size()) << op.name;
    for (size_t i = 0; i < op.attrs.size(); ++i) EXPECT_EQ(layer->attrs[i].key, op.attrs[i].name) << op.name;
  }
}

}  // namespace
}  // namespace tandem::test
