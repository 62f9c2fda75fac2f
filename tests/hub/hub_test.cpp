// Hugging Face model directories: what config.json may say and what is
// refused (naming the key), the model file made of it, and the weights read
// under Tandem's names and layouts. The logits against transformers itself
// are checked by hf_import.sh.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint/float_tensors.hpp"
#include "checkpoint/safetensors.hpp"
#include "hub/hf_config.hpp"
#include "hub/hf_model_file.hpp"
#include "hub/hf_weights.hpp"
#include "model/model_parser.hpp"
#include "shell.hpp"
#include "tandem/half.hpp"
#include "temp_dir.hpp"

namespace tandem::host::hub {
namespace {

using checkpoint::TensorRecord;

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

const char* kGpt2 = R"({"model_type": "gpt2", "vocab_size": 5, "n_embd": 4, "n_layer": 1, "n_head": 2,
                        "n_positions": 8, "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0})";
const char* kLlama = R"({"model_type": "llama", "vocab_size": 16, "hidden_size": 8, "num_hidden_layers": 1,
                         "num_attention_heads": 2, "intermediate_size": 12, "max_position_embeddings": 32)";

// A llama config.json with `extra` keys (", \"key\": value").
std::string llama(const std::string& extra) {
  return std::string(kLlama) + extra + "}";
}

std::string qwen2(const std::string& extra) {
  std::string text = llama(extra);
  return text.replace(text.find("llama"), 5, "qwen2");
}

Result<HfConfig> config_of(const test::TempDir& dir, const std::string& json) {
  write(dir.file("config.json"), json);
  return read_hf_config(dir.file(""));
}

TEST(HubConfig, ReadsEachFamilysShape) {
  test::TempDir dir;
  auto gpt2 = config_of(dir, kGpt2);
  ASSERT_TRUE(gpt2) << gpt2.error().message;
  EXPECT_EQ(gpt2->family, Family::gpt2);
  EXPECT_EQ(gpt2->intermediate, 16);  // n_inner absent: 4 x n_embd
  EXPECT_TRUE(gpt2->tied);
  auto qwen = config_of(dir, R"({"model_type": "qwen2", "vocab_size": 16, "hidden_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 12,
      "max_position_embeddings": 32, "rope_theta": 1000000.0, "sliding_window": null})");
  ASSERT_TRUE(qwen) << qwen.error().message;
  EXPECT_TRUE(qwen->qkv_bias);
  EXPECT_FALSE(qwen->out_bias);  // Qwen2: biases on q, k and v only
  EXPECT_EQ(qwen->kv_heads, 2);
  EXPECT_EQ(qwen->head_dim, 2);
  EXPECT_EQ(qwen->rope_theta, 1e6);
  auto llama3 = config_of(dir, llama(R"(, "rope_scaling": {"rope_type": "llama3", "factor": 32.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"));
  ASSERT_TRUE(llama3) << llama3.error().message;
  EXPECT_TRUE(llama3->rope_scaling.llama3);
  EXPECT_EQ(llama3->rope_scaling.factor, 32.0);
  EXPECT_EQ(llama3->rope_scaling.original_context, 8192);
  auto plain = config_of(dir, llama(R"(, "rope_scaling": {"rope_type": "default"})"));
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_FALSE(plain->rope_scaling.llama3);
}

TEST(HubConfig, RefusesWhatTandemCannotExpressNamingTheKey) {
  test::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"({"model_type": "bert"})", "\"model_type\" = \"bert\""},
      {llama(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})"),
       "\"rope_scaling\": \"rope_type\" = \"yarn\""},
      {llama(R"(, "rope_scaling": {"type": "llama3", "low_freq_factor": 4.0, "high_freq_factor": 1.0})"),
       "\"high_freq_factor\" = 1.0: must be above low_freq_factor"},
      {llama(R"(, "rope_scaling": 2.0)"), "\"rope_scaling\" = 2.0: is not an object"},
      {llama(R"(, "hidden_act": "gelu")"), "\"hidden_act\" = \"gelu\""},
      {llama(R"(, "num_local_experts": 8)"), "\"num_local_experts\" = 8"},
      {llama(R"(, "num_key_value_heads": 3)"), "\"num_key_value_heads\" = 3"},
      {llama(R"(, "hidden_size": -8)"), "\"hidden_size\" = -8"},
      {qwen2(R"(, "use_sliding_window": true)"), "\"use_sliding_window\" = true"},
      {R"({"model_type": "llama"})", "has no \"vocab_size\""},
      {std::string(kGpt2).substr(0, std::strlen(kGpt2) - 1) + R"(, "activation_function": "relu"})",
       "\"activation_function\" = \"relu\""},
      {"[1, 2", "is not a JSON object"}};
  for (const auto& [json, named] : refused) {
    auto c = config_of(dir, json);
    ASSERT_FALSE(c) << json;
    EXPECT_NE(c.error().message.find("config.json"), std::string::npos) << c.error().message;
    EXPECT_NE(c.error().message.find(named), std::string::npos) << c.error().message;
  }
  EXPECT_FALSE(read_hf_config(dir.file("absent")));
}

TEST(HubModelFile, ParsesAndChecksTheContext) {
  test::TempDir dir;
  auto mistral = config_of(dir, R"({"model_type": "mistral", "vocab_size": 16, "hidden_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 12,
      "max_position_embeddings": 64, "sliding_window": 16})");
  ASSERT_TRUE(mistral) << mistral.error().message;
  auto within = hf_model_file(*mistral, {16, "m"});
  ASSERT_TRUE(within) << within.error().message;
  auto spec = model::parse_model_text(*within, "m.toml");
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->input_shape, (std::vector<int64_t>{16}));
  auto beyond_window = hf_model_file(*mistral, {32, "m"});
  ASSERT_FALSE(beyond_window);
  EXPECT_NE(beyond_window.error().message.find("sliding_window"), std::string::npos);
  auto beyond_positions = hf_model_file(*mistral, {65, "m"});
  ASSERT_FALSE(beyond_positions);
  EXPECT_NE(beyond_positions.error().message.find("64 positions"), std::string::npos);
}

TensorRecord f32(const std::string& name, std::vector<int64_t> shape, float first) {
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = first + float(i);
  TensorRecord t{name, TDM_F32, std::move(shape), std::vector<std::byte>(n * 4)};
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

float at(const TensorRecord& t, size_t i) {
  float v;
  std::memcpy(&v, t.data.data() + 4 * i, 4);
  return v;
}

// A GPT-2 of one block, width 4, in its own layouts.
checkpoint::Checkpoint gpt2_weights() {
  checkpoint::Checkpoint cp;
  cp.tensors = {f32("transformer.wte.weight", {5, 4}, 0),
                f32("transformer.wpe.weight", {8, 4}, 0),
                f32("transformer.h.0.attn.c_attn.weight", {4, 12}, 0),
                f32("transformer.h.0.attn.c_attn.bias", {12}, 100),
                f32("transformer.h.0.mlp.c_fc.weight", {4, 16}, 0),
                f32("transformer.h.0.attn.bias", {1, 1, 8, 8}, 0),
                f32("lm_head.weight", {5, 4}, 0)};
  // ln_1's scale stored as bf16: 1.5 is exact in it.
  TensorRecord ln{"transformer.h.0.ln_1.weight", TDM_BF16, {4}, std::vector<std::byte>(8)};
  const uint16_t one_and_a_half = 0x3FC0;
  for (int i = 0; i < 4; ++i) std::memcpy(ln.data.data() + 2 * i, &one_and_a_half, 2);
  cp.tensors.push_back(ln);
  return cp;
}

TEST(HubWeights, Gpt2ConvOneDsAreTransposedAndItsPackedProjectionSplit) {
  test::TempDir dir;
  write(dir.file("config.json"), kGpt2);
  ASSERT_TRUE(checkpoint::write_safetensors(dir.file("model.safetensors"), gpt2_weights()));
  auto cp = read_hf_weights(dir.file(""));
  ASSERT_TRUE(cp) << cp.error().message;
  const TensorRecord* k = cp->find("h.0.attn.k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{4, 4}));
  // k = c_attn[:, 4:8]ᵀ: k[o][i] = c_attn[i][4 + o] = 12·i + 4 + o.
  EXPECT_EQ(at(*k, 0 * 4 + 0), 4.0f);
  EXPECT_EQ(at(*k, 1 * 4 + 2), 12 * 2 + 4 + 1.0f);
  const TensorRecord* v_bias = cp->find("h.0.attn.v.bias");
  ASSERT_NE(v_bias, nullptr);
  EXPECT_EQ(at(*v_bias, 0), 108.0f);
  const TensorRecord* fc = cp->find("h.0.c_fc.weight");
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->shape, (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(at(*fc, 3 * 4 + 1), 16 * 1 + 3.0f);
  const TensorRecord* gamma = cp->find("h.0.ln_1.gamma");
  ASSERT_NE(gamma, nullptr);
  EXPECT_EQ(gamma->dtype, TDM_BF16);  // as stored: widened only as it is written to its parameter
  auto widened = checkpoint::as_f32(*gamma, "dir");
  ASSERT_TRUE(widened);
  EXPECT_EQ((*widened)[2], 1.5f);
  EXPECT_EQ(cp->find("lm_head.weight"), nullptr);  // tied: the head reads wte
  EXPECT_EQ(cp->find("h.0.attn.bias"), nullptr);   // the causal mask buffer
  EXPECT_EQ(cp->metadata.count(std::string(kLeadingRowsKey) + "wpe.weight"), 1u);
}

TEST(HubWeights, RefusesUnknownTensorsPicklesAndBadIndexes) {
  test::TempDir dir;
  write(dir.file("config.json"), kGpt2);
  auto pickle_only = read_hf_weights(dir.file(""));
  ASSERT_FALSE(pickle_only);
  write(dir.file("pytorch_model.bin"), "");
  pickle_only = read_hf_weights(dir.file(""));
  ASSERT_FALSE(pickle_only);
  EXPECT_NE(pickle_only.error().message.find("safe_serialization"), std::string::npos)
      << pickle_only.error().message;
  checkpoint::Checkpoint odd = gpt2_weights();
  odd.tensors.push_back(f32("transformer.h.0.crossattention.q_attn.weight", {4, 4}, 0));
  ASSERT_TRUE(checkpoint::write_safetensors(dir.file("model.safetensors"), odd));
  auto unknown = read_hf_weights(dir.file(""));
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("crossattention.q_attn.weight"), std::string::npos);
  EXPECT_NE(unknown.error().message.find("model.safetensors"), std::string::npos);
  write(dir.file("model.safetensors.index.json"),
        R"({"weight_map": {"wte.weight": "../elsewhere.safetensors"}})");
  auto escaping = read_hf_weights(dir.file(""));
  ASSERT_FALSE(escaping);
  EXPECT_NE(escaping.error().message.find("not a file name in the directory"), std::string::npos);
}

TEST(HubCli, ImportWritesAModelFileAndRefusesBadDirectories) {
  test::TempDir dir;
  write(dir.file("config.json"), llama(R"(, "num_key_value_heads": 1, "tie_word_embeddings": true)"));
  auto run = test::shell(std::string(TANDEM_EXE) + " import " + dir.file("") + " --context 16 --output " +
                         dir.file("m.toml"));
  ASSERT_EQ(run.code, 0) << run.output;
  auto spec = model::parse_model_file(dir.file("m.toml"));
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->input_shape, (std::vector<int64_t>{16}));
  write(dir.file("config.json"), llama(R"(, "rope_scaling": {"rope_type": "linear", "factor": 2.0})"));
  run = test::shell(std::string(TANDEM_EXE) + " import " + dir.file("") + " --output " + dir.file("n.toml"));
  EXPECT_EQ(run.code, 4) << run.output;
  EXPECT_NE(run.output.find("rope_scaling"), std::string::npos) << run.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("n.toml")));
  run = test::shell(std::string(TANDEM_EXE) + " import " + dir.file("nothing") + " --output " +
                    dir.file("n.toml"));
  EXPECT_EQ(run.code, 4) << run.output;
  EXPECT_NE(run.output.find("config.json"), std::string::npos) << run.output;
}

TEST(HubCli, ExportGivesBackTheImportedTensorsBitForBit) {
  test::TempDir dir;
  const std::string source = dir.file("gpt2"), exe = TANDEM_EXE;
  std::filesystem::create_directories(source);
  write(source + "/config.json", kGpt2);
  write(source + "/tokenizer.json", "{}");
  const checkpoint::Checkpoint original = gpt2_weights();
  ASSERT_TRUE(checkpoint::write_safetensors(source + "/model.safetensors", original));
  auto run = test::shell(exe + " import " + source + " --output " + dir.file("m.toml"));
  ASSERT_EQ(run.code, 0) << run.output;
  run = test::shell(exe + " export " + dir.file("m.toml") + " --weights " + source +
                    " --format hf --output " + dir.file("out"));
  ASSERT_EQ(run.code, 0) << run.output;
  auto exported = checkpoint::read_safetensors(dir.file("out/model.safetensors"));
  ASSERT_TRUE(exported) << exported.error().message;
  EXPECT_EQ(exported->metadata.at("format"), "pt");
  EXPECT_TRUE(std::filesystem::exists(dir.file("out/config.json")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("out/tokenizer.json")));
  for (const TensorRecord& t : original.tensors) {
    const TensorRecord* back = exported->find(t.name);
    if (t.name == "lm_head.weight" || t.name == "transformer.h.0.attn.bias") {
      EXPECT_EQ(back, nullptr) << t.name;  // tied; a buffer transformers makes itself
      continue;
    }
    ASSERT_NE(back, nullptr) << t.name;
    EXPECT_EQ(back->shape, t.shape) << t.name;
    if (t.dtype == TDM_F32) {
      EXPECT_EQ(back->data, t.data) << t.name;
    }
  }
  // Without [model] hf_dir (a model not made by import) it asks for the configuration.
  write(dir.file("plain.toml"), R"([model]
task = "language_model"
context = 8
vocab_size = 5
[[layers]]
name = "wte"
op = "embedding"
num_embeddings = 5
embedding_dim = 4
[[layers]]
name = "lm_head"
op = "linear"
out_features = 5
[data]
format = "tokens"
train_tokens = "x.bin"
)");
  run = test::shell(exe + " export " + dir.file("plain.toml") + " --weights " + source +
                    " --format hf --output " + dir.file("out2"));
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_NE(run.output.find("--hf-config"), std::string::npos) << run.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out2")));
}

}  // namespace
}  // namespace tandem::host::hub
