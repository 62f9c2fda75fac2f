// The checkpointing feature plugin on the reference backend: recomputing
// segments during backward gives bit-identical training (dropout included),
// and on a 16-layer MLP the activation memory the executor allocates is cut
// by at least half.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <string>

#include "training_fixture.hpp"

namespace tandem::test {
namespace {

// 16 linear layers of width 64 with ReLU, dropout after layers 2 and 8.
std::string mlp16() {
  std::string text = "[model]\ninput = [32]\nclasses = 4\n";
  for (int i = 1; i <= 16; ++i) {
    text += "[[layers]]\nname = \"fc" + std::to_string(i) +
            "\"\nop = \"linear\"\nout_features = " + (i == 16 ? "4" : "64\nactivation = \"relu\"") + "\n";
    if (i == 2 || i == 8)
      text += "[[layers]]\nname = \"drop" + std::to_string(i) + "\"\nop = \"dropout\"\np = 0.25\n";
  }
  return text + R"([train]
lr = 0.02
momentum = 0.9
batch_size = 32
steps = 6
seed = 4
[data]
format = "synthetic"
synthetic_samples = 256
synthetic_test_samples = 0
)";
}

class Checkpointing : public TrainingOnReference {
 protected:
  void SetUp() override { load("checkpointing"); }
};

TEST_F(Checkpointing, RecomputedTrainingIsBitIdenticalAndNeedsLessThanHalfTheActivations) {
  auto plain = trainer(mlp16(), {});
  auto recomputed = trainer(mlp16(), {"features.checkpointing.segments=auto"});
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  ASSERT_TRUE(recomputed.ok()) << recomputed.error().message;
  ASSERT_TRUE((*plain)->run().ok());
  ASSERT_TRUE((*recomputed)->run().ok());
  // Same updates from the same gradients, bit for bit, at every layer.
  for (int i = 1; i <= 16; ++i) {
    const std::string w = "fc" + std::to_string(i) + ".weight";
    EXPECT_EQ(read(**plain, w), read(**recomputed, w)) << w;
    EXPECT_EQ(read(**plain, "optim." + w + ".momentum"), read(**recomputed, "optim." + w + ".momentum")) << w;
  }
  // The rewrite: recomputed forward nodes run in backward.
  size_t clones = 0;
  const host::Graph& g = (*recomputed)->model().graph;
  for (size_t i = 0; i < g.node_count(); ++i)
    if (g.node_at(i)->name.find(".recompute") != std::string::npos) {
      ++clones;
      EXPECT_EQ(g.node_at(i)->phase, TDM_PHASE_BACKWARD) << g.node_at(i)->name;
    }
  EXPECT_GT(clones, 0u);
  const uint64_t before = (*plain)->executor().plan().estimate.activations;
  const uint64_t after = (*recomputed)->executor().plan().estimate.activations;
  std::cout << "activation memory, 16-layer MLP: " << before << " bytes plain, " << after
            << " bytes with checkpointing (sqrt(n) segments)" << std::endl;
  EXPECT_LE(2 * after, before);
}

TEST_F(Checkpointing, NamedSegmentEndsAndAMemoryBudget) {
  // Ends after fc4, fc8, fc12: four segments, the first three recomputed.
  auto named = trainer(mlp16(), {"features.checkpointing.segments=[\"fc4\", \"fc8\", \"fc12\"]"});
  ASSERT_TRUE(named.ok()) << named.error().message;
  const host::Graph& g = (*named)->model().graph;
  EXPECT_NE(g.node_by_name("fc2.recompute"), nullptr);
  EXPECT_NE(g.node_by_name("drop8.recompute"), nullptr);  // dropout replays its mask
  EXPECT_EQ(g.node_by_name("fc14.recompute"), nullptr);   // the last segment is kept
  // A budget everything fits in recomputes nothing.
  auto roomy = trainer(mlp16(), {"features.checkpointing.memory_budget=\"1GiB\""});
  ASSERT_TRUE(roomy.ok()) << roomy.error().message;
  const host::Graph& r = (*roomy)->model().graph;
  for (size_t i = 0; i < r.node_count(); ++i)
    EXPECT_EQ(r.node_at(i)->name.find(".recompute"), std::string::npos) << r.node_at(i)->name;
  // A tight one recomputes.
  auto tight = trainer(mlp16(), {"features.checkpointing.memory_budget=\"64KiB\""});
  ASSERT_TRUE(tight.ok()) << tight.error().message;
  EXPECT_LT((*tight)->executor().plan().estimate.activations,
            (*roomy)->executor().plan().estimate.activations);
}

// A language model of three repeated blocks, with attention dropout.
std::string language_model(const std::string& text_file) {
  return R"([model]
task = "language_model"
context = 8
vocab_size = 256
[[layers]]
name = "tok"
op = "embedding"
num_embeddings = 256
embedding_dim = 16
[[layers]]
name = "h"
op = "repeat"
count = 3
[[layers.body]]
name = "norm"
op = "layer_norm"
[[layers.body]]
name = "attn"
op = "attention"
heads = 2
dropout = 0.2
[[layers.body]]
name = "res"
op = "add"
inputs = ["h", "attn"]
[[layers]]
name = "head"
op = "linear"
out_features = 256
tie_weight = "tok"
[train]
optimizer = "adamw"
lr = 0.01
batch_size = 4
steps = 3
seed = 2
[data]
format = "tokens"
train_tokens = ")" +
         text_file + R"("
)";
}

// segments = "blocks": one segment per copy of the repeated block; training
// is bit-identical (attention's dropout replays its mask when recomputed).
TEST_F(Checkpointing, OneSegmentPerRepeatedBlock) {
  const std::string text = ::testing::TempDir() + "/checkpointing_lm.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 40; ++i) out << "to be or not to be. ";
  }
  auto plain = trainer(language_model(text), {});
  auto blocks = trainer(language_model(text), {"features.checkpointing.segments=\"blocks\""});
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  ASSERT_TRUE(blocks.ok()) << blocks.error().message;
  const host::Graph& g = (*blocks)->model().graph;
  EXPECT_NE(g.node_by_name("h.0.attn.attention.recompute"), nullptr);
  EXPECT_NE(g.node_by_name("h.1.attn.attention.recompute"), nullptr);
  EXPECT_EQ(g.node_by_name("h.2.attn.attention.recompute"), nullptr) << "the last segment is kept";
  ASSERT_TRUE((*plain)->run().ok());
  ASSERT_TRUE((*blocks)->run().ok());
  for (const char* w : {"tok.weight", "h.0.attn.q.weight", "h.2.attn.out.weight", "h.1.norm.gamma"})
    EXPECT_EQ(read(**plain, w), read(**blocks, w)) << w;
  auto none = trainer(mlp16(), {"features.checkpointing.segments=\"blocks\""});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("needs repeated blocks"), std::string::npos) << none.error().message;
}

TEST_F(Checkpointing, BadConfigurationIsNamed) {
  auto unknown = trainer(mlp16(), {"features.checkpointing.segments=[\"fc4\", \"fc99\"]"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("'fc99'"), std::string::npos) << unknown.error().message;
  auto word = trainer(mlp16(), {"features.checkpointing.segments=\"many\""});
  ASSERT_FALSE(word.ok());
  EXPECT_NE(word.error().message.find("segments must be"), std::string::npos) << word.error().message;
  auto budget = trainer(mlp16(), {"features.checkpointing.memory_budget=\"lots\""});
  ASSERT_FALSE(budget.ok());
  EXPECT_NE(budget.error().message.find("memory_budget must be a size"), std::string::npos)
      << budget.error().message;
}

}  // namespace
}  // namespace tandem::test
