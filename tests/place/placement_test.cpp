// Pinned placement on a known graph: fc1 and fc3 pinned to reference:0,
// fc2 on the run's default device onednn:0. Exactly four tensor copies per
// step: fc1's output and fc3's input gradient cross to onednn, fc2's output
// and its input gradient cross back — each once, shared by every reader —
// plus the learning rate scalar.
#include <gtest/gtest.h>

#include <algorithm>

#include "exec/planner.hpp"
#include "lowering/autodiff.hpp"
#include "lowering/model_graph.hpp"
#include "lowering/optimizer.hpp"
#include "model/model_parser.hpp"
#include "pinned_mlp.hpp"
#include "place/placement.hpp"
#include "place/split.hpp"

namespace tandem::test {
namespace {

const char* const kModel = kPinnedMlp;

struct Placed {
  host::lowering::ModelGraph model;
  host::Result<host::place::Placement> placement = host::make_error("not run", TDM_INTERNAL);
};

// kModel with each (from, to) text replacement applied.
Placed place(const std::vector<std::pair<std::string, std::string>>& edits, bool strict,
             const std::string& optimizer_device = "", bool averaged_gradients = false) {
  std::string text = kModel;
  for (const auto& [from, to] : edits) text.replace(text.find(from), from.size(), to);
  auto spec = host::model::parse_model_text(text, "pins.toml");
  EXPECT_TRUE(spec.ok()) << spec.error().message;
  auto model = host::lowering::build_forward(*spec, 4, host::lowering::Mode::Train);
  EXPECT_TRUE(model.ok());
  EXPECT_TRUE(host::lowering::append_backward(*model).ok());
  EXPECT_TRUE(host::lowering::append_optimizer(*model, spec->train).ok());
  host::place::PlacementOptions o;
  o.default_device = "onednn:0";
  o.strict = strict;
  o.optimizer_device = optimizer_device;
  o.averaged_gradients = averaged_gradients;
  o.resolve = [](const std::string& pin) -> host::Result<std::string> {
    if (pin == "reference" || pin == "reference:0") return std::string("reference:0");
    if (pin == "onednn" || pin == "onednn:0" || pin == "cpu") return std::string("onednn:0");
    return host::make_error("no device '" + pin + "'", TDM_NOT_FOUND);
  };
  Placed p{std::move(*model)};
  p.placement = host::place::place_layers(p.model.graph, *spec, o);
  return p;
}

TEST(Placement, InsertsExactlyTheCopiesTheBoundariesNeed) {
  Placed p = place({}, false);
  ASSERT_TRUE(p.placement.ok()) << p.placement.error().message;
  const auto& copies = p.placement->copies;
  std::vector<std::string> seen;
  for (const auto& c : copies) seen.push_back(c.value + ": " + c.from + " -> " + c.to);
  std::sort(seen.begin(), seen.end());
  const std::vector<std::string> expected = {
      "fc1: reference:0 -> onednn:0",  // fc2 reads fc1's output (forward, and again in backward: shared)
      "fc2: onednn:0 -> reference:0",  // fc3 reads fc2's output
      "fc2.grad_input:0: onednn:0 -> reference:0",  // fc1's backward reads d(fc1 output)
      "fc3.grad_input:0: reference:0 -> onednn:0",  // fc2's backward reads d(fc2 output)
      "optim.lr: reference:0 -> onednn:0",          // fc2's update reads the learning rate
  };
  std::vector<std::string> sorted = expected;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(seen, sorted);
  EXPECT_EQ(p.placement->copy_bytes(), 4u * (4 * 16 * 4) + 4);
  EXPECT_EQ(p.placement->devices, (std::vector<std::string>{"onednn:0", "reference:0"}));
  const host::Graph& g = p.model.graph;
  for (size_t i = 0; i < g.node_count(); ++i) {
    const host::Node& n = *g.node_at(i);
    ASSERT_FALSE(n.device.empty()) << n.name;
    // A layer's forward, backward and updates run where the layer is pinned.
    const std::string want = n.layer == "fc2" ? "onednn:0" : "reference:0";
    if (n.layer == "fc1" || n.layer == "fc2" || n.layer == "fc3") {
      EXPECT_EQ(n.device, want) << n.name;
    }
    // Every input is on the node's device (a copy reads the other one).
    if (n.op == host::ops::kDeviceCopy) continue;
    for (host::ValueId v : n.inputs) {
      if (v == host::kNoValue) continue;
      EXPECT_EQ(p.placement->home.at(v), n.device) << n.name << " reads " << g.value(v)->name;
    }
  }
  // The loss follows the logits: no copy for it.
  EXPECT_EQ(g.node_by_name("loss")->device, "reference:0");
}

TEST(Placement, OneDeviceNeedsNoCopy) {
  Placed p = place(
      {{"device = \"reference\"", "device = \"onednn\""}, {"device = \"reference:0\"", "device = \"cpu\""}},
      false);
  ASSERT_TRUE(p.placement.ok()) << p.placement.error().message;
  EXPECT_TRUE(p.placement->copies.empty());
  EXPECT_EQ(p.placement->devices, std::vector<std::string>{"onednn:0"});
}

TEST(Placement, StrictRefusesACopyTheModelFileDoesNotAskFor) {
  Placed p = place({}, true);
  ASSERT_FALSE(p.placement.ok());
  const std::string& m = p.placement.error().message;
  EXPECT_NE(
      m.find("placement = \"strict\": layer 'fc2' on onednn:0 reads 'fc1' of layer 'fc1' on reference:0"),
      std::string::npos)
      << m;
  // Pinning fc2 as well makes every boundary one the user drew.
  Placed pinned =
      place({{"out_features = 16\nactivation = \"relu\"\n[[layers]]\nname = \"fc3\"",
              "out_features = 16\nactivation = \"relu\"\ndevice = \"onednn:0\"\n[[layers]]\nname = \"fc3\""}},
            true);
  ASSERT_TRUE(pinned.placement.ok()) << pinned.placement.error().message;
  EXPECT_EQ(pinned.placement->copies.size(), 5u);
}

// The placed graph split into one graph per device, each plannable alone.
TEST(Placement, SplitsIntoOneRunnableGraphPerDevice) {
  Placed p = place({}, false);
  ASSERT_TRUE(p.placement.ok()) << p.placement.error().message;
  auto split = host::place::split_by_device(p.model.graph, *p.placement);
  ASSERT_TRUE(split.ok()) << split.error().message;
  ASSERT_EQ(split->devices.size(), 2u);
  EXPECT_EQ(split->transfers.size(), p.placement->copies.size());
  size_t nodes = 0;
  for (const auto& d : split->devices) {
    nodes += d.graph.node_count();
    for (size_t i = 0; i < d.graph.node_count(); ++i) EXPECT_EQ(d.graph.node_at(i)->device, d.device);
    auto plan = host::exec::make_plan(d.graph, {});
    EXPECT_TRUE(plan.ok()) << d.device << ": " << plan.error().message;
  }
  EXPECT_EQ(nodes + split->transfers.size(), p.model.graph.node_count());
  const auto& reference = split->devices[1];
  ASSERT_EQ(reference.device, "reference:0");
  // fc3 reads fc2's output as an input of its own graph, copied in.
  const host::Value* in = reference.graph.value_by_name("fc2@reference:0");
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->kind, TDM_VALUE_INPUT);
  EXPECT_EQ(reference.graph.value_by_name("fc2"), nullptr);
  EXPECT_TRUE(reference.exported.count("fc1"));
  EXPECT_TRUE(split->devices[0].exported.count("fc2"));
  // Each device holds its own layers' parameters, as parameters.
  EXPECT_EQ(reference.graph.value_by_name("fc1.weight")->kind, TDM_VALUE_PARAMETER);
  EXPECT_EQ(reference.graph.value_by_name("fc2.weight"), nullptr);
  EXPECT_EQ(split->devices[0].graph.value_by_name("fc2.weight")->kind, TDM_VALUE_PARAMETER);
}

// ZeRO-Offload style: the updates run on the optimizer's device, where the
// parameters and their momentum live; each parameter is copied to the
// training device before its first reader, each gradient back right after
// the node that produced it, in backward, so it streams out while backward
// goes on.
TEST(Placement, AnOffloadedOptimizerGetsEachGradientRightAfterItsProducer) {
  Placed p =
      place({{"device = \"reference\"\n", ""}, {"device = \"reference:0\"\n", ""}}, false, "reference:0");
  ASSERT_TRUE(p.placement.ok()) << p.placement.error().message;
  const host::Graph& g = p.model.graph;
  size_t updates = 0, gradients = 0, parameters = 0;
  for (size_t i = 0; i < g.node_count(); ++i) {
    const host::Node& n = *g.node_at(i);
    if (n.op == "sgd_update") {
      ++updates;
      EXPECT_EQ(n.device, "reference:0") << n.name;
      for (const auto& [output, input] : host::ops::inplace_pairs(n))
        EXPECT_EQ(p.placement->home.at(n.inputs[input]), "reference:0") << g.value(n.inputs[input])->name;
    }
    if (n.op != host::ops::kDeviceCopy) continue;
    const host::Value& source = *g.value(n.inputs[0]);
    if (source.kind == TDM_VALUE_PARAMETER) {
      ++parameters;
      EXPECT_EQ(n.device, "onednn:0") << n.name;
      EXPECT_EQ(n.phase, TDM_PHASE_FORWARD) << n.name;
    } else if (source.kind == TDM_VALUE_GRADIENT) {
      ++gradients;
      EXPECT_EQ(n.device, "reference:0") << n.name;
      EXPECT_EQ(n.phase, TDM_PHASE_BACKWARD) << n.name;
      // Nothing but other copies between the producer and its copy.
      for (size_t k = *g.position(source.producer) + 1; k < i; ++k)
        EXPECT_EQ(g.node_at(k)->op, host::ops::kDeviceCopy) << n.name << " waits for " << g.node_at(k)->name;
    }
  }
  EXPECT_EQ(updates, 6u);
  EXPECT_EQ(parameters, 6u);
  EXPECT_EQ(gradients, 6u);
}

// With data parallelism the ranks average each gradient between backward
// and the optimizer, where backward made it: its copy to the optimizer's
// device waits for the optimizer phase, after every backward node.
TEST(Placement, AnOffloadedOptimizerOfRanksGetsEachGradientAfterBackward) {
  Placed p = place({{"device = \"reference\"\n", ""}, {"device = \"reference:0\"\n", ""}}, false,
                   "reference:0", true);
  ASSERT_TRUE(p.placement.ok()) << p.placement.error().message;
  const host::Graph& g = p.model.graph;
  size_t last_backward = 0, gradients = 0;
  for (size_t i = 0; i < g.node_count(); ++i)
    if (g.node_at(i)->phase == TDM_PHASE_BACKWARD) last_backward = i;
  for (size_t i = 0; i < g.node_count(); ++i) {
    const host::Node& n = *g.node_at(i);
    if (n.op != host::ops::kDeviceCopy || g.value(n.inputs[0])->kind != TDM_VALUE_GRADIENT) continue;
    ++gradients;
    EXPECT_EQ(n.phase, TDM_PHASE_OPTIMIZER) << n.name;
    EXPECT_GT(i, last_backward) << n.name;
  }
  EXPECT_EQ(gradients, 6u);
}

TEST(Placement, AnUnknownDeviceIsNamedWithItsLayer) {
  Placed p = place({{"device = \"reference:0\"", "device = \"tpu\""}}, false);
  ASSERT_FALSE(p.placement.ok());
  EXPECT_NE(p.placement.error().message.find("layer 'fc3': device 'tpu': no device 'tpu'"), std::string::npos)
      << p.placement.error().message;
}

}  // namespace
}  // namespace tandem::test
