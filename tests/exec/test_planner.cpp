// The memory planner on hand-built graphs: buffer reuse by liveness, no two
// live values overlapping, in-place pairs, the estimate's categories.
#include <gtest/gtest.h>

#include "exec/planner.hpp"

namespace tandem::test {
namespace {

using host::Graph;
using host::NodeSpec;
using host::TensorType;
using host::ValueId;
using host::exec::make_plan;
using host::exec::Plan;
using host::exec::ValueStorage;

TensorType f32(std::vector<int64_t> dims) {
  return TensorType{TDM_F32, std::move(dims)};
}

ValueId add_node(Graph& g, const std::string& op, const std::string& name, std::vector<ValueId> inputs,
                 std::vector<TensorType> outputs, size_t which = 0) {
  NodeSpec spec;
  spec.op = op;
  spec.name = name;
  spec.layer = name;
  spec.inputs = std::move(inputs);
  spec.outputs = std::move(outputs);
  auto id = g.insert_node(spec);
  EXPECT_TRUE(id.ok()) << id.error().message;
  return g.node(*id)->outputs.at(which);
}

// Every pair of arena values that are live at the same time and do not share
// storage through an in-place pair occupies disjoint bytes.
void expect_no_live_overlap(const Plan& plan) {
  for (const auto& [a_id, a] : plan.values) {
    for (const auto& [b_id, b] : plan.values) {
      if (a_id >= b_id || a.kind != ValueStorage::Kind::Arena || b.kind != ValueStorage::Kind::Arena)
        continue;
      if (a.owner == b.owner) continue;
      bool live_together = !(a.last < b.first || b.last < a.first);
      bool bytes_overlap = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      EXPECT_FALSE(live_together && bytes_overlap) << "values " << a_id << " and " << b_id << " overlap";
      EXPECT_LE(a.offset + a.bytes, plan.arena_bytes);
    }
  }
}

TEST(Planner, ReusesArenaByLiveness) {
  Graph g;
  ValueId x = *g.add_value("x", TDM_VALUE_INPUT, f32({256}));
  ValueId v0 = add_node(g, "relu", "n0", {x}, {f32({256})});
  ValueId v1 = add_node(g, "relu", "n1", {v0}, {f32({256})});
  ValueId v2 = add_node(g, "add", "n2", {v1, v0}, {f32({256})});
  ValueId v3 = add_node(g, "relu", "n3", {v2}, {f32({512})});
  ValueId v4 = add_node(g, "relu", "n4", {v3}, {f32({512})});
  add_node(g, "add", "n5", {v4, v3}, {f32({512})});

  auto plan = make_plan(g, {0, 128, 0, 0, 64, 0});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  // Sizes: 3 x 1 KiB then 3 x 2 KiB = 9 KiB unshared.
  EXPECT_EQ(plan->activations_unshared, 3u * 1024 + 3u * 2048);
  EXPECT_LT(plan->arena_bytes, plan->activations_unshared);
  // At most three values are live at once, the largest set being v3, v4, v5,
  // but n5 writes its sum into v4's bytes (v4 is dead after it): two blocks.
  EXPECT_EQ(plan->arena_bytes, 2u * 2048);
  expect_no_live_overlap(*plan);
  EXPECT_EQ(plan->find(v0)->first, 0u);
  EXPECT_EQ(plan->find(v0)->last, 2u);
  EXPECT_EQ(plan->find(v2)->last, 3u);
  EXPECT_EQ(plan->workspace_bytes, 128u);
  // The input is persistent, in its own buffer.
  EXPECT_EQ(plan->find(x)->kind, ValueStorage::Kind::Persistent);
  ASSERT_EQ(plan->persistent.size(), 1u);
  EXPECT_EQ(plan->estimate.inputs, 1024u);
  (void)v1;
}

TEST(Planner, InplaceUpdatesShareStorage) {
  Graph g;
  ValueId s = *g.add_value("s", TDM_VALUE_INPUT, f32({4}));
  ValueId x = *g.add_value("x", TDM_VALUE_INPUT, f32({2, 4}));
  ValueId gamma = *g.add_value("bn.gamma", TDM_VALUE_PARAMETER, f32({4}));
  ValueId beta = *g.add_value("bn.beta", TDM_VALUE_PARAMETER, f32({4}));
  ValueId mean = add_node(g, "relu", "m", {s}, {f32({4})});
  ValueId var = add_node(g, "relu", "v", {s}, {f32({4})});
  NodeSpec bn;
  bn.op = "batch_norm_train";
  bn.name = "bn";
  bn.inputs = {x, gamma, beta, mean, var};
  bn.outputs = {f32({2, 4}), f32({4}), f32({4}), f32({4}), f32({4})};
  auto bn_id = g.insert_node(bn);
  ASSERT_TRUE(bn_id.ok()) << bn_id.error().message;
  ValueId mean_out = g.node(*bn_id)->outputs[3];
  ValueId var_out = g.node(*bn_id)->outputs[4];
  add_node(g, "relu", "reads_var", {var}, {f32({4})});  // keeps `var` alive past bn
  add_node(g, "add", "use", {mean_out, var_out}, {f32({4})});

  // An optimizer update of a parameter and its momentum buffer.
  ValueId w = *g.add_value("w", TDM_VALUE_PARAMETER, f32({8}));
  ValueId dw = *g.add_value("w.grad", TDM_VALUE_GRADIENT, f32({8}));
  ValueId lr = *g.add_value("optim.lr", TDM_VALUE_STATE, f32({}));
  ValueId buf = *g.add_value("w.momentum", TDM_VALUE_STATE, f32({8}));
  NodeSpec sgd;
  sgd.op = "sgd_update";
  sgd.name = "sgd.w";
  sgd.inputs = {w, dw, lr, buf};
  sgd.outputs = {f32({8}), f32({8})};
  auto sgd_id = g.insert_node(sgd);
  ASSERT_TRUE(sgd_id.ok()) << sgd_id.error().message;

  auto plan = make_plan(g, {});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  expect_no_live_overlap(*plan);
  // Dead after bn: running_mean_out takes running_mean's bytes.
  EXPECT_EQ(plan->find(mean_out)->owner, mean);
  EXPECT_EQ(plan->find(mean_out)->offset, plan->find(mean)->offset);
  // Still read after bn: running_var_out gets bytes of its own.
  EXPECT_EQ(plan->find(var_out)->owner, var_out);
  // Persistent updates are in place.
  const auto* w_out = plan->find(g.node(*sgd_id)->outputs[0]);
  const auto* buf_out = plan->find(g.node(*sgd_id)->outputs[1]);
  EXPECT_EQ(w_out->kind, ValueStorage::Kind::Persistent);
  EXPECT_EQ(w_out->persistent, plan->find(w)->persistent);
  EXPECT_EQ(buf_out->persistent, plan->find(buf)->persistent);

  const auto& e = plan->estimate;
  EXPECT_EQ(e.parameters, 2u * 16 + 32);  // gamma, beta and w
  EXPECT_EQ(e.gradients, 32u);
  EXPECT_EQ(e.optimizer_state, 4u + 32);  // optim.lr by name, w.momentum by its reader
  EXPECT_EQ(e.inputs, 16u + 32);
  EXPECT_EQ(e.total, e.parameters + e.gradients + e.optimizer_state + e.other_state + e.inputs +
                         e.activations + e.workspace + e.allocator_rounding);
  // Each allocation is whole blocks of the allocator's granule.
  EXPECT_EQ(e.total % 512, 0u);
}

// A reshape is a view: its output shares the input's bytes even while the
// input is still read later (no copy), the shared block lives until both are
// dead.
TEST(Planner, ReshapeOfALiveInputSharesItsBytes) {
  Graph g;
  ValueId x = *g.add_value("x", TDM_VALUE_INPUT, f32({4, 8}));
  ValueId a = add_node(g, "relu", "a", {x}, {f32({4, 8})});
  ValueId flat = add_node(g, "reshape", "flat", {a}, {f32({32})});
  ValueId r = add_node(g, "relu", "r", {flat}, {f32({32})});  // flat's last read
  add_node(g, "add", "late", {a, a}, {f32({4, 8})});          // a is read after the view

  auto plan = make_plan(g, {});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  expect_no_live_overlap(*plan);
  const ValueStorage* view = plan->find(flat);
  EXPECT_EQ(view->owner, a);
  EXPECT_EQ(view->offset, plan->find(a)->offset);
  // `late` reads a after the view's last use: nothing else may take a's bytes
  // before that, so r (written while a still lives) has bytes of its own.
  const ValueStorage* relu_out = plan->find(r);
  EXPECT_NE(relu_out->owner, a);
  EXPECT_TRUE(relu_out->offset + relu_out->bytes <= view->offset ||
              view->offset + view->bytes <= relu_out->offset);
  EXPECT_GE(plan->find(a)->last, 3u);
}

// add / sub / mul write into an operand of their shape that no later node
// reads: a residual sum into its dead branch, a gradient sum into its dead
// partial sums. Never into an operand read later, a broadcast one, a
// persistent tensor, or a value the host reads after the run.
TEST(Planner, SumsWriteIntoADeadOperandOfTheirShape) {
  Graph g;
  ValueId x = *g.add_value("x", TDM_VALUE_INPUT, f32({4, 8}));
  ValueId w = *g.add_value("w", TDM_VALUE_PARAMETER, f32({4, 8}));
  ValueId bias = *g.add_value("bias", TDM_VALUE_PARAMETER, f32({8}));
  ValueId h = add_node(g, "relu", "h", {x}, {f32({4, 8})});
  ValueId branch = add_node(g, "relu", "branch", {h}, {f32({4, 8})});
  ValueId residual = add_node(g, "add", "residual", {h, branch}, {f32({4, 8})});  // h read later
  ValueId late = add_node(g, "mul", "late", {h, residual}, {f32({4, 8})});
  ValueId p0 = add_node(g, "relu", "p0", {late}, {f32({4, 8})});
  ValueId p1 = add_node(g, "relu", "p1", {late}, {f32({4, 8})});
  ValueId sum = add_node(g, "sub", "sum", {p0, p1}, {f32({4, 8})});  // both dead
  ValueId with_param = add_node(g, "add", "with_param", {w, sum}, {f32({4, 8})});
  ValueId wide = add_node(g, "relu", "wide", {with_param}, {f32({4, 8})});
  ValueId broadcast = add_node(g, "add", "broadcast", {bias, wide}, {f32({4, 8})});
  ValueId kept = add_node(g, "relu", "kept", {broadcast}, {f32({4, 8})});
  ValueId last = add_node(g, "add", "last", {kept, kept}, {f32({4, 8})});

  auto plan = make_plan(g, {}, {kept});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  expect_no_live_overlap(*plan);
  EXPECT_EQ(plan->find(residual)->owner, branch);  // h is read by `late`
  EXPECT_EQ(plan->find(late)->owner, h);           // h's last read: the first operand
  EXPECT_EQ(plan->find(sum)->owner, p0);           // the first operand that fits
  // w is a parameter: the sum takes sum's (dead) bytes instead.
  EXPECT_EQ(plan->find(with_param)->kind, ValueStorage::Kind::Arena);
  EXPECT_EQ(plan->find(with_param)->owner, p0);
  EXPECT_EQ(plan->find(broadcast)->owner, wide);  // bias broadcasts: not its shape
  EXPECT_EQ(plan->find(last)->owner, last);       // the host reads `kept` after the run

  // A backend older than ABI 1.9 was not promised these bindings.
  auto older = make_plan(g, {}, {kept}, {}, 0, {}, /*reuse_operands=*/false);
  ASSERT_TRUE(older.ok()) << older.error().message;
  for (ValueId sum_of : {residual, late, sum, with_param, broadcast, last})
    EXPECT_EQ(older->find(sum_of)->owner, sum_of);
}

// What the cuda plugin's allocator takes for an allocation (mem_footprint,
// ABI 1.6): 512 B classes below 1 MiB, 2 MiB ones above.
uint64_t two_mib_pages(uint64_t bytes) {
  const uint64_t unit = bytes < (1u << 20) ? 512 : 2u << 20;
  return (std::max<uint64_t>(bytes, 1) + unit - 1) / unit * unit;
}

// A backend whose allocator rounds like that: the plan counts each
// allocation at its size, so its total is what the device will hold. The
// persistent values are one allocation, each at a 256-byte boundary.
TEST(Planner, CountsEachAllocationAtTheBackendsFootprint) {
  Graph g;
  ValueId w = *g.add_value("w", TDM_VALUE_PARAMETER, f32({9 * 65536}));  // 2.25 MiB
  ValueId x = *g.add_value("x", TDM_VALUE_INPUT, f32({100}));            // 400 B: a 512 B slot
  add_node(g, "mul", "n0", {x, x}, {f32({100})});
  (void)w;
  auto granule = make_plan(g, {});
  auto paged = make_plan(g, {}, {}, {}, 0, two_mib_pages);
  ASSERT_TRUE(granule.ok() && paged.ok());
  EXPECT_EQ(granule->estimate.parameters, paged->estimate.parameters);
  const uint64_t arena = paged->estimate.activations;
  EXPECT_EQ(paged->estimate.total, (4u << 20) + two_mib_pages(arena));
  EXPECT_EQ(paged->estimate.allocator_rounding - granule->estimate.allocator_rounding,
            paged->estimate.total - granule->estimate.total);
  // A staged input's second buffer is an allocation of its own, counted at the footprint too.
  ASSERT_TRUE(host::exec::plan_staged_input(*paged, x).ok());
  EXPECT_EQ(paged->estimate.total, (4u << 20) + 512 + two_mib_pages(arena));
}

// GPT-2 small's training state (bench/models/gpt2_small.toml: 124 M
// parameters, each with its gradient and AdamW's two moments, all f32) on a
// backend that rounds like the cuda plugin: one allocation for all of them
// wastes a few hundred bytes a tensor, where an allocation each took 2 MiB
// steps (a 768 x 768 weight, 2.25 MiB, in 4 MiB).
TEST(Planner, GptTwoSmallsStateWastesUnderFivePercentOfItsBytes) {
  std::vector<std::vector<int64_t>> shapes = {{50257, 768}, {1024, 768}, {768}, {768}};  // embeddings, ln_f
  for (int block = 0; block < 12; ++block)
    for (const std::vector<int64_t>& s : std::vector<std::vector<int64_t>>{{768},
                                                                           {768},
                                                                           {768, 768},
                                                                           {768},
                                                                           {768, 768},
                                                                           {768},
                                                                           {768, 768},
                                                                           {768},
                                                                           {768, 768},
                                                                           {768},  // ln1, q k v o
                                                                           {768},
                                                                           {768},
                                                                           {3072, 768},
                                                                           {3072},
                                                                           {768, 3072},
                                                                           {768}})  // ln2, fc, proj
      shapes.push_back(s);
  Graph g;
  uint64_t bytes = 0, one_allocation_each = 0;
  int64_t parameters = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string name = "p" + std::to_string(i);
    ASSERT_TRUE(g.add_value(name, TDM_VALUE_PARAMETER, f32(shapes[i])).ok());
    ASSERT_TRUE(g.add_value(name + ".grad", TDM_VALUE_GRADIENT, f32(shapes[i])).ok());
    ASSERT_TRUE(g.add_value("optim." + name + ".m", TDM_VALUE_STATE, f32(shapes[i])).ok());
    ASSERT_TRUE(g.add_value("optim." + name + ".v", TDM_VALUE_STATE, f32(shapes[i])).ok());
    int64_t n = 1;
    for (int64_t d : shapes[i]) n *= d;
    parameters += n;
    bytes += 4 * uint64_t(n) * 4;
    one_allocation_each += 4 * (two_mib_pages(uint64_t(n) * 4) - uint64_t(n) * 4);
  }
  EXPECT_EQ(parameters, 124439808);  // what tandem bench counts for the model file
  auto plan = make_plan(g, {}, {}, {}, 0, two_mib_pages);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const auto& e = plan->estimate;
  EXPECT_EQ(e.parameters + e.gradients + e.optimizer_state, bytes);
  EXPECT_LE(double(e.allocator_rounding), 0.05 * double(bytes));
  EXPECT_LE(e.allocator_rounding, (2u << 20) + 256 * 4 * shapes.size());  // one page's tail, the alignment
  EXPECT_GE(double(one_allocation_each), 0.15 * double(bytes));           // what one allocation each took
}

}  // namespace
}  // namespace tandem::test
