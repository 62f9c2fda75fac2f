// Gradient buckets for data parallelism: gradients are grouped in the order
// backward finishes them, and a bucket is ready only after every backward
// node that writes or reads one of its gradients.
#include <gtest/gtest.h>

#include "lowering/autodiff.hpp"
#include "lowering/model_graph.hpp"
#include "lowering/optimizer.hpp"
#include "model/model_parser.hpp"
#include "train/gradient_buckets.hpp"

namespace tandem::test {
namespace {

using host::ValueId;

// fc1 784->100 (313,600 + 400 bytes), fc2 100->10 (4,000 + 40 bytes).
const char* kModel = R"([model]
name = "buckets"
input = [784]
classes = 10
[[layers]]
name = "fc1"
op = "linear"
out_features = 100
activation = "relu"
[[layers]]
name = "fc2"
op = "linear"
out_features = 10
)";

struct Built {
  host::lowering::ModelGraph model;
  std::vector<ValueId> gradients;  // in parameter order: fc1.weight, fc1.bias, fc2.weight, fc2.bias
};

Built build() {
  auto spec = host::model::parse_model_text(kModel, "buckets.toml");
  EXPECT_TRUE(spec.ok());
  auto model = host::lowering::build_forward(*spec, 4, host::lowering::Mode::Train);
  EXPECT_TRUE(model.ok());
  EXPECT_TRUE(host::lowering::append_backward(*model).ok());
  EXPECT_TRUE(host::lowering::append_optimizer(*model, spec->train).ok());
  Built b{std::move(*model), {}};
  for (ValueId p : b.model.parameters) b.gradients.push_back(b.model.gradients.at(p));
  return b;
}

std::string name(const Built& b, ValueId v) {
  return b.model.graph.value(v)->name;
}

// The last position before `end` at which a node writes or reads `v`, plus one.
size_t last_touch(const host::Graph& g, ValueId v, size_t end) {
  size_t at = 0;
  for (size_t i = 0; i < end; ++i) {
    const host::Node& n = *g.node_at(i);
    for (ValueId x : n.inputs)
      if (x == v) at = i + 1;
    for (ValueId x : n.outputs)
      if (x == v) at = i + 1;
  }
  return at;
}

TEST(GradientBuckets, OneGradientPerBucketInTheOrderBackwardFinishesThem) {
  const Built b = build();
  const auto buckets =
      host::train::plan_gradient_buckets(b.model.graph, b.gradients, b.model.optimizer_begin, 0);
  ASSERT_EQ(buckets.size(), 4u);
  // Backward runs from the last layer: fc2's gradients are final first.
  EXPECT_EQ(name(b, buckets[0].gradients[0]).rfind("fc2.", 0), 0u) << name(b, buckets[0].gradients[0]);
  EXPECT_EQ(name(b, buckets[3].gradients[0]).rfind("fc1.", 0), 0u) << name(b, buckets[3].gradients[0]);
  for (size_t i = 0; i < buckets.size(); ++i) {
    ASSERT_EQ(buckets[i].gradients.size(), 1u);
    EXPECT_EQ(buckets[i].ready_at,
              last_touch(b.model.graph, buckets[i].gradients[0], b.model.optimizer_begin));
    EXPECT_LE(buckets[i].ready_at, b.model.optimizer_begin);
    if (i > 0) {
      EXPECT_LE(buckets[i - 1].ready_at, buckets[i].ready_at);
    }
  }
  // fc2's gradients are ready while fc1's backward still has to run.
  EXPECT_LT(buckets[1].ready_at, buckets[3].ready_at);
}

TEST(GradientBuckets, ABucketClosesOnceItHoldsTheRequestedBytes) {
  const Built b = build();
  // 4,001 bytes: fc2.weight (4,000 bytes) alone is not enough, with fc2.bias
  // it is; fc1.weight fills the second by itself, fc1.bias starts a third.
  const auto buckets =
      host::train::plan_gradient_buckets(b.model.graph, b.gradients, b.model.optimizer_begin, 4001);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].gradients.size(), 2u);
  EXPECT_EQ(buckets[0].bytes, 4040u);
  EXPECT_EQ(buckets[1].bytes, 313600u);
  EXPECT_EQ(buckets[2].bytes, 400u);
  EXPECT_EQ(buckets[1].dtype, TDM_F32);
  size_t latest = 0;
  for (ValueId g : buckets[0].gradients)
    latest = std::max(latest, last_touch(b.model.graph, g, b.model.optimizer_begin));
  EXPECT_EQ(buckets[0].ready_at, latest);

  // Everything in one bucket: ready when backward is all but done.
  const auto one = host::train::plan_gradient_buckets(b.model.graph, b.gradients, b.model.optimizer_begin,
                                                      size_t(1) << 30);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].gradients.size(), 4u);
  EXPECT_EQ(one[0].ready_at, buckets[2].ready_at);
}

}  // namespace
}  // namespace tandem::test
