#include "model/model_parser.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tandem::host::model {
namespace {

const char* kMlp = R"([model]
name = "mlp"
input = [1, 28, 28]
classes = 10

[[layers]]
name = "flat"
op = "flatten"

[[layers]]
name = "fc1"
op = "linear"
out_features = 256
activation = "relu"

[[layers]]
name = "fc2"
op = "linear"
out_features = 10
device = "cpu"

[train]
optimizer = "sgd"
lr = 0.1
momentum = 0.9
batch_size = 128
epochs = 3

[data]
format = "synthetic"

[features.amp]
dtype = "bf16"
initial_scale = 65536
)";

std::string error_of(const std::string& text, std::vector<std::string> overrides = {}) {
  auto r = parse_model_text(text, "m.toml", overrides);
  return r.ok() ? std::string("(parsed)") : r.error().message;
}

TEST(ModelParser, ParsesLayersTrainDataAndFeatures) {
  auto r = parse_model_text(kMlp, "m.toml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ModelSpec& m = *r;
  EXPECT_EQ(m.name, "mlp");
  EXPECT_EQ(m.input_shape, (std::vector<int64_t>{1, 28, 28}));
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.layers[1].op, "linear");
  EXPECT_EQ(m.layers[1].int_attr("out_features", 0), 256);
  EXPECT_EQ(m.layers[1].string_attr("activation", ""), "relu");
  EXPECT_EQ(m.layers[2].device, std::optional<std::string>("cpu"));
  EXPECT_EQ(m.layers[1].where.line, 10u);
  EXPECT_DOUBLE_EQ(m.train.lr, 0.1);
  EXPECT_EQ(m.train.batch_size, 128);
  EXPECT_EQ(m.data.format, "synthetic");
  EXPECT_EQ(m.features.at("amp").at("dtype"), "bf16");
  EXPECT_EQ(m.features.at("amp").at("initial_scale"), "65536");
  EXPECT_EQ(m.source_hash.size(), 16u);
}

TEST(ModelParser, UnknownKeyNamesPositionLayerAndSuggestion) {
  std::string text = kMlp;
  text.replace(text.find("out_features = 256"), 18, "out_feature = 256");
  const std::string e = error_of(text);
  EXPECT_NE(
      e.find("m.toml:13:15: layer 'fc1' (linear): unknown key 'out_feature' (did you mean 'out_features'?)"),
      std::string::npos)
      << e;
}

TEST(ModelParser, MissingRequiredAttributeNamesLayer) {
  std::string text = kMlp;
  text.replace(text.find("out_features = 10\n"), 18, "");
  const std::string e = error_of(text);
  EXPECT_NE(e.find("layer 'fc2' (linear): missing 'out_features' (an integer)"), std::string::npos) << e;
}

TEST(ModelParser, WrongTypeSaysExpectedForm) {
  std::string text = kMlp;
  text.replace(text.find("lr = 0.1"), 8, "lr = \"fast\"");
  EXPECT_NE(error_of(text).find("m.toml:24:6: 'lr' must be a number"), std::string::npos) << error_of(text);
}

TEST(ModelParser, UnknownOpListsTheKnownOnes) {
  std::string text = kMlp;
  text.replace(text.find("op = \"flatten\""), 14, "op = \"flaten\"");
  const std::string e = error_of(text);
  EXPECT_NE(e.find("m.toml:8:6: layer 'flat' (flaten): unknown op 'flaten' (did you mean 'flatten'?); "
                   "expected one of: linear"),
            std::string::npos)
      << e;
}

// A typo within two edits, or another framework's name for one of ours, is
// answered with ours: keys, ops and the values of a choice alike.
TEST(ModelParser, ANameFromAnotherFrameworkOrATypoIsAnsweredWithOurs) {
  const auto hint_for = [](const std::string& from, const std::string& to) {
    std::string text = kMlp;
    text.replace(text.find(from), from.size(), to);
    return error_of(text);
  };
  std::string e = hint_for("lr = 0.1", "learning_rate = 0.1");
  EXPECT_NE(e.find("unknown key 'learning_rate' (did you mean 'lr'?)"), std::string::npos) << e;
  e = hint_for("op = \"flatten\"", "op = \"dense\"");
  EXPECT_NE(e.find("unknown op 'dense' (did you mean 'linear'?)"), std::string::npos) << e;
  e = hint_for("op = \"flatten\"", "op = \"layernorm\"");
  EXPECT_NE(e.find("unknown op 'layernorm' (did you mean 'layer_norm'?)"), std::string::npos) << e;
  e = hint_for("optimizer = \"sgd\"", "optimizer = \"adam\"");
  EXPECT_NE(e.find("'optimizer' = \"adam\" is not one of: sgd, adamw (did you mean 'adamw'?)"),
            std::string::npos)
      << e;
  e = hint_for("activation = \"relu\"", "activation = \"rellu\"");
  EXPECT_NE(e.find("'activation' = \"rellu\" is not one of: none, relu"), std::string::npos) << e;
  EXPECT_NE(e.find("(did you mean 'relu'?)"), std::string::npos) << e;
  // Nothing close: no guess.
  e = hint_for("op = \"flatten\"", "op = \"transformer\"");
  EXPECT_NE(e.find("unknown op 'transformer'; expected one of:"), std::string::npos) << e;
}

TEST(ModelParser, SyntaxErrorHasLineAndColumn) {
  const std::string e = error_of("[model]\ninput = [1, 2\n");
  EXPECT_EQ(e.rfind("m.toml:", 0), 0u) << e;
  EXPECT_NE(e.find("m.toml:2:15:"), std::string::npos) << e;  // where the file ended inside the list
}

TEST(ModelParser, UnknownSectionIsAnError) {
  EXPECT_NE(
      error_of(std::string(kMlp) + "[trian]\nlr = 1\n").find("unknown key 'trian' (did you mean 'train'?)"),
      std::string::npos);
}

TEST(ModelParser, DuplicateLayerNames) {
  std::string text = kMlp;
  text.replace(text.find("name = \"fc2\""), 12, "name = \"fc1\"");
  EXPECT_NE(error_of(text).find("the name 'fc1' is used twice"), std::string::npos) << error_of(text);
}

TEST(ModelParser, SetOverridesKeysAndLayers) {
  auto r = parse_model_text(
      kMlp, "m.toml",
      {"train.lr=0.05", "train.optimizer=adamw", "layers.fc1.out_features=64", "data.threads=4"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(r->train.lr, 0.05);
  EXPECT_EQ(r->train.optimizer, "adamw");
  EXPECT_EQ(r->layers[1].int_attr("out_features", 0), 64);
  EXPECT_EQ(r->data.threads, 4);
  EXPECT_NE(r->source_hash, parse_model_text(kMlp, "m.toml")->source_hash);
}

TEST(ModelParser, HashIgnoresRunLengthButNotTheModel) {
  const auto base = parse_model_text(kMlp, "m.toml")->source_hash;
  EXPECT_EQ(parse_model_text(kMlp, "m.toml", {"train.epochs=30", "train.log_every=5"})->source_hash, base);
  EXPECT_NE(parse_model_text(kMlp, "m.toml", {"train.momentum=0.5"})->source_hash, base);
  EXPECT_NE(parse_model_text(kMlp, "m.toml", {"layers.fc1.out_features=64"})->source_hash, base);
}

TEST(ModelParser, OverridesAreValidatedLikeTheFile) {
  EXPECT_NE(error_of(kMlp, {"train.lr=fast"}).find("'lr' must be a number"), std::string::npos);
  EXPECT_NE(error_of(kMlp, {"train.learning_rate=0.1"}).find("unknown key 'learning_rate'"),
            std::string::npos);
  EXPECT_NE(error_of(kMlp, {"layers.nope.x=1"}).find("no layer named 'nope'"), std::string::npos);
  EXPECT_NE(error_of(kMlp, {"train.lr"}).find("expected KEY=VALUE"), std::string::npos);
}

TEST(ModelParser, MissingFile) {
  auto r = parse_model_file("/nonexistent/model.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("/nonexistent/model.toml: cannot open"), std::string::npos);
}

}  // namespace
}  // namespace tandem::host::model

namespace tandem::host::model {
namespace {

const char* kRepeated = R"([model]
task = "language_model"
context = 8
vocab_size = 16
[[layers]]
name = "tok"
op = "embedding"
num_embeddings = 16
embedding_dim = 4
[[layers]]
name = "h"
op = "repeat"
count = 3
[[layers.body]]
name = "norm"
op = "rms_norm"
[[layers.body]]
name = "attn"
op = "attention"
heads = 2
[[layers.body]]
name = "res"
op = "add"
inputs = ["h", "attn"]
[[layers]]
name = "out"
op = "linear"
out_features = 16
inputs = ["h"]
[data]
format = "tokens"
train_tokens = "t.txt"
)";

TEST(ModelParser, RepeatBlocksAreNumberedCopiesWithTheirInputsRewired) {
  auto r = parse_model_text(kRepeated, "m.toml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->layers.size(), 1u + 3 * 3 + 1);
  EXPECT_EQ(r->layers[1].name, "h.0.norm");
  EXPECT_EQ(r->layers[3].inputs, (std::vector<std::string>{"tok", "h.0.attn"}))
      << "block 0 reads the layer before";
  EXPECT_EQ(r->layers[6].inputs, (std::vector<std::string>{"h.0.res", "h.1.attn"}))
      << "block 1 reads block 0";
  EXPECT_EQ(r->layers[9].name, "h.2.res");
  EXPECT_EQ(r->layers[10].inputs, (std::vector<std::string>{"h.2.res"}))
      << "after the block, its name is its last layer";
  EXPECT_TRUE(r->language_model());
  EXPECT_EQ(r->input_shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(r->classes, 16);
}

TEST(ModelParser, ARepeatBlocksDeviceListPinsEachCopy) {
  auto with = [](const std::string& device) {
    std::string text = kRepeated;
    text.replace(text.find("count = 3\n"), 10, "count = 3\ndevice = " + device + "\n");
    return text;
  };
  auto split = parse_model_text(with(R"(["onednn:0", "onednn:0", "onednn:1"])"), "m.toml");
  ASSERT_TRUE(split.ok()) << split.error().message;
  EXPECT_EQ(split->layers[1].device, "onednn:0");  // h.0.norm
  EXPECT_EQ(split->layers[6].device, "onednn:0");  // h.1.res
  EXPECT_EQ(split->layers[9].device, "onednn:1");  // h.2.res
  EXPECT_FALSE(split->layers[0].device.has_value()) << "layers outside the block keep theirs";
  auto one = parse_model_text(with(R"("cpu")"), "m.toml");
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_EQ(one->layers[4].device, "cpu");
  EXPECT_EQ(split->source_hash, one->source_hash) << "where layers run is not part of the model";
  EXPECT_NE(error_of(with(R"(["cpu", "cpu"])")).find("a list of 3 devices, one per copy"), std::string::npos)
      << error_of(with(R"(["cpu", "cpu"])"));
  EXPECT_NE(error_of(with("3")).find("a list of 3 devices"), std::string::npos);
}

TEST(ModelParser, PipelineMicroBatchesDivideTheBatch) {
  auto ok = parse_model_text(kRepeated, "m.toml", {"train.batch_size=8", "train.pipeline_microbatches=4"});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->train.pipeline_microbatches, 4);
  EXPECT_TRUE(ok->train.pipeline);
  const std::string bad = error_of(kRepeated, {"train.batch_size=8", "train.pipeline_microbatches=3"});
  EXPECT_NE(bad.find("[train] pipeline_microbatches = 3 does not divide [train] batch_size = 8"),
            std::string::npos)
      << bad;
  auto off = parse_model_text(kRepeated, "m.toml", {"train.pipeline=false"});
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_FALSE(off->train.pipeline);
  EXPECT_EQ(off->source_hash, parse_model_text(kRepeated, "m.toml", {"train.pipeline=true"})->source_hash)
      << "turning the pipeline off trains the same model";
}

TEST(ModelParser, OverridesReachTheLayersOfARepeatBlockInEveryCopy) {
  auto r = parse_model_text(kRepeated, "m.toml", {"layers.h.attn.dropout=0.1", "layers.h.attn.heads=4"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (const char* name : {"h.0.attn", "h.1.attn", "h.2.attn"}) {
    const auto at =
        std::find_if(r->layers.begin(), r->layers.end(), [&](const auto& l) { return l.name == name; });
    ASSERT_NE(at, r->layers.end()) << name;
    EXPECT_DOUBLE_EQ(at->float_attr("dropout", 0), 0.1) << name;
    EXPECT_EQ(at->int_attr("heads", 0), 4) << name;
  }
  EXPECT_NE(error_of(kRepeated, {"layers.h.mlp.heads=4"}).find("no layer named 'mlp' in the body of 'h'"),
            std::string::npos);
  EXPECT_NE(error_of(kRepeated, {"layers.tok.x.y=1"}).find("no layer named 'x' in the body of 'tok'"),
            std::string::npos);
  EXPECT_NE(error_of(kRepeated, {"layers.h.attn.heads.x=1"}).find("not a key of a model file"),
            std::string::npos);
  EXPECT_NE(error_of(kRepeated, {"train.a.b.c=1"}).find("not a key of a model file"), std::string::npos);
}

TEST(ModelParser, RepeatAndLanguageModelMistakesAreErrorsAtTheirPlace) {
  auto replaced = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  const std::string text = kRepeated;
  EXPECT_NE(
      error_of(replaced(text, "count = 3", "count = 0")).find("m.toml:10:1: repeat block 'h': needs count"),
      std::string::npos)
      << error_of(replaced(text, "count = 3", "count = 0"));
  EXPECT_NE(error_of(replaced(text, "op = \"rms_norm\"", "op = \"repeat\"")).find("no nested repeat"),
            std::string::npos);
  EXPECT_NE(error_of(replaced(text, "vocab_size = 16", "vocab_size = 16\nclasses = 3"))
                .find("[model] classes does not apply to a language model"),
            std::string::npos);
  EXPECT_NE(error_of(replaced(text, "format = \"tokens\"", "format = \"synthetic\""))
                .find("reads [data] format = \"tokens\""),
            std::string::npos);
  EXPECT_NE(error_of(replaced(text, "context = 8\n", "")).find("needs context = N"), std::string::npos);
  EXPECT_NE(error_of(replaced(text, "name = \"res\"", "name = \"norm\"")).find("'norm' is used twice"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::host::model

namespace tandem::host::model {
namespace {

// Found by the model-file fuzzer: a --set path thousands of parts deep
// built as many nested sections before anything checked it (10 s under
// ASan). A path longer than a model file's keys, or with an empty part, is
// refused at once.
TEST(ModelParser, SetPathsDeeperThanAnyKeyOrWithEmptyPartsAreRefused) {
  for (const std::string& bad : {std::string(3000, '.') + "x=1", std::string("a.b.c.d=1"),
                                 std::string("train..lr=1"), std::string(".lr=1")}) {
    const std::string message = error_of(kMlp, {bad});
    EXPECT_NE(message.find("not a key of a model file"), std::string::npos) << message;
    EXPECT_LT(message.size(), 300u) << "the message quotes at most the start of a long path";
  }
  EXPECT_EQ(error_of(kMlp, {"features.amp.dtype=\"f16\""}), "(parsed)");
  EXPECT_EQ(error_of(kMlp, {"layers.fc1.out_features=64"}), "(parsed)");
}

TEST(ModelParser, TrainableFalseFreezesALayerOrEveryCopyOfABlock) {
  auto r = parse_model_text(R"([model]
input = [4]
classes = 2
[[layers]]
name = "h"
op = "repeat"
count = 2
trainable = false
  [[layers.body]]
  name = "fc"
  op = "linear"
  out_features = 4
[[layers]]
name = "g"
op = "repeat"
count = 2
  [[layers.body]]
  name = "a"
  op = "linear"
  out_features = 4
  trainable = false
  [[layers.body]]
  name = "b"
  op = "linear"
  out_features = 4
[[layers]]
name = "head"
op = "linear"
out_features = 2
)",
                            "m.toml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::map<std::string, bool> trainable;
  for (const LayerSpec& l : r->layers) trainable[l.name] = l.trainable;
  EXPECT_EQ(trainable, (std::map<std::string, bool>{{"h.0.fc", false},
                                                    {"h.1.fc", false},
                                                    {"g.0.a", false},
                                                    {"g.0.b", true},
                                                    {"g.1.a", false},
                                                    {"g.1.b", true},
                                                    {"head", true}}));
  EXPECT_NE(
      error_of(std::string(kMlp).replace(std::string(kMlp).find("device = \"cpu\""), 14, "trainable = 0")),
      "(parsed)");
}

}  // namespace
}  // namespace tandem::host::model
