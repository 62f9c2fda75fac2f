// Mistakes around Hugging Face models: a model directory whose
// configuration, weights or tokenizer is damaged, settings of LoRA and of
// rope scaling that cannot hold. Each is refused naming the file, key or
// layer, and no file is touched.
#include <cstdlib>
#include <filesystem>

#include "bad_input.hpp"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

const char* const kConfig = R"({"model_type": "llama", "vocab_size": 16, "hidden_size": 8,
  "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 12, "max_position_embeddings": 32,
  "tie_word_embeddings": false})";

// A safetensors file of f32 zeros under these names and shapes.
std::string safetensors(const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
  std::string header = "{";
  size_t offset = 0;
  for (const auto& [name, shape] : tensors) {
    size_t n = 4;
    std::string dims;
    for (int64_t d : shape) {
      n *= size_t(d);
      dims += (dims.empty() ? "" : ",") + std::to_string(d);
    }
    header += (header.size() > 1 ? "," : "") + std::string("\"") + name +
              "\":{\"dtype\":\"F32\",\"shape\":[" + dims + "],\"data_offsets\":[" + std::to_string(offset) +
              "," + std::to_string(offset + n) + "]}";
    offset += n;
  }
  header += "}";
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(offset, '\0');
}

std::vector<std::pair<std::string, std::vector<int64_t>>> llama_tensors() {
  const std::string l = "model.layers.0.";
  return {{"model.embed_tokens.weight", {16, 8}},
          {l + "input_layernorm.weight", {8}},
          {l + "self_attn.q_proj.weight", {8, 8}},
          {l + "self_attn.k_proj.weight", {8, 8}},
          {l + "self_attn.v_proj.weight", {8, 8}},
          {l + "self_attn.o_proj.weight", {8, 8}},
          {l + "post_attention_layernorm.weight", {8}},
          {l + "mlp.gate_proj.weight", {12, 8}},
          {l + "mlp.up_proj.weight", {12, 8}},
          {l + "mlp.down_proj.weight", {8, 12}},
          {"model.norm.weight", {8}},
          {"lm_head.weight", {16, 8}}};
}

// {d}/hf (the tiny Llama), {d}/m.toml (its import, context 8), {d}/ids.bin;
// then `damage(dir)` and `extra` appended to m.toml.
BadInput hub(const std::string& name, const std::string& args, std::vector<std::string> says,
             std::function<void(const std::string&)> damage, const std::string& extra = "") {
  return {name, args, std::move(says), 0, [damage, extra](const std::string& dir) {
            fs::create_directories(dir + "/hf");
            write_file(dir + "/hf/config.json", kConfig);
            write_file(dir + "/hf/model.safetensors", safetensors(llama_tensors()));
            std::string ids;
            for (int i = 0; i < 200; ++i) ids += std::string{char(i % 16), '\0'};
            write_file(dir + "/ids.bin", ids);
            const std::string import = "'" TANDEM_EXE "' import '" + dir + "/hf' --context 8 --output '" +
                                       dir + "/m.toml' >/dev/null";
            ASSERT_EQ(std::system(import.c_str()), 0);
            write_file(dir + "/m.toml", read_file(dir + "/m.toml") + extra);
            if (damage) damage(dir);
          }};
}

const char* const kInit =
    "train m.toml --device reference --run-dir run --init-from hf --set data.train_tokens=ids.bin";

class HubInput : public BadInputTest {};

TEST_P(HubInput, IsRefusedClearly) {
  run_bad_input(GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    HuggingFace, HubInput,
    ::testing::Values(
        hub("import_config_not_json", "import hf --output again.toml", {"hf/config.json"},
            [](const std::string& d) { write_file(d + "/hf/config.json", "{\"model_type\": "); }),
        hub("import_rope_scaling_yarn", "import hf --output again.toml",
            {"config.json", "\"rope_type\" = \"yarn\""},
            [](const std::string& d) {
              std::string c = kConfig;
              c.insert(c.size() - 1, ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}");
              write_file(d + "/hf/config.json", c);
            }),
        hub("init_from_truncated_weights", kInit, {"model.safetensors"},
            [](const std::string& d) {
              std::string b = read_file(d + "/hf/model.safetensors");
              write_file(d + "/hf/model.safetensors", b.substr(0, b.size() - 100));
            }),
        hub("init_from_a_missing_shard", kInit, {"model-00002-of-00002.safetensors"},
            [](const std::string& d) {
              fs::rename(d + "/hf/model.safetensors", d + "/hf/model-00001-of-00002.safetensors");
              write_file(d + "/hf/model.safetensors.index.json",
                         R"({"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                             "lm_head.weight": "model-00002-of-00002.safetensors"}})");
            }),
        hub("init_from_weights_without_the_head", kInit, {"lm_head"},
            [](const std::string& d) {
              auto tensors = llama_tensors();
              tensors.pop_back();
              write_file(d + "/hf/model.safetensors", safetensors(tensors));
            }),
        hub("tokenize_with_a_broken_tokenizer_json", "tokenize m.toml --tokenizer hf --output out.bin",
            {"hf/tokenizer.json", "it ends too early, after 11 bytes"},
            [](const std::string& d) { write_file(d + "/hf/tokenizer.json", "{\"model\": 3"); }),
        hub("tokenize_without_a_tokenizer", "tokenize m.toml --tokenizer hf --output out.bin", {"hf"},
            nullptr),
        hub("lora_on_an_int8_base_from_scratch",
            "train m.toml --device reference --run-dir run --set data.train_tokens=ids.bin",
            {"m.toml", "base = \"int8\"", "--init-from"}, nullptr,
            "\n[features.lora]\nbase = \"int8\"\ntargets = [\"layers.*.self_attn.q\"]\n"),
        hub("lora_base_of_another_width", kInit,
            {"m.toml", "[features.lora] base must be \"f32\", \"bf16\" or \"int8\""}, nullptr,
            "\n[features.lora]\nbase = \"int4\"\ntargets = [\"layers.*.self_attn.q\"]\n"),
        hub("rope_factor_without_scaling", kInit, {"self_attn", "rope_factor applies to rope_scaling"},
            [](const std::string& d) {
              std::string m = read_file(d + "/m.toml");
              m.insert(m.find("rope = true") + 11, "\nrope_factor = 8.0");
              write_file(d + "/m.toml", m);
            })),
    CaseName());

}  // namespace
}  // namespace tandem::test
