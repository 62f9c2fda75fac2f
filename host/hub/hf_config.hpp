// A Hugging Face model directory's config.json, as far as Tandem's layers
// can express it: the GPT-2, Llama (2 and 3), Mistral and Qwen2 families.
//
// What the families differ in, and so what this records: GPT-2 has learned
// positions, layer norms, a GELU MLP and biases everywhere; the others rope,
// RMS norms, a SwiGLU MLP (gate, up, down), grouped key/value heads, and
// biases only where the family or the configuration says (Qwen2: q, k and v;
// Llama: `attention_bias`, `mlp_bias`), and Llama 3.1's rope scaling. A
// configuration outside that — another rope scaling, a sliding window
// shorter than the context, experts, an activation other than the
// family's — is refused naming the config.json key and its value, never
// approximated.
#pragma once

#include <cstdint>
#include <string>

#include "util/result.hpp"

namespace tandem::host::hub {

enum class Family { gpt2, llama };  // llama: Llama, Mistral and Qwen2

struct HfConfig {
  std::string dir;         // the model directory
  std::string model_type;  // config.json's: gpt2, llama, mistral, qwen2
  Family family = Family::llama;
  int64_t vocab_size = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t intermediate = 0;    // the MLP's width
  int64_t max_positions = 0;   // max_position_embeddings (GPT-2: n_positions)
  int64_t sliding_window = 0;  // 0: none (attention sees the whole context)
  double norm_epsilon = 1e-5, rope_theta = 10000.0;
  // rope_scaling with rope_type "llama3" (Llama 3.1, 3.2, 3.3).
  struct RopeScaling {
    bool llama3 = false;
    double factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
    int64_t original_context = 8192;  // original_max_position_embeddings
  } rope_scaling;
  bool tied = false;  // the output head is the token embedding
  bool qkv_bias = false, out_bias = false, mlp_bias = false;
  std::string gelu_approximate = "tanh";  // GPT-2: "tanh" (gelu_new) or "none" (gelu)
  // Training-time dropout the family applies (GPT-2: attn_pdrop,
  // resid_pdrop, embd_pdrop; the others: attention_dropout).
  double attention_dropout = 0, residual_dropout = 0, embedding_dropout = 0;
  std::string torch_dtype;  // as stored, for the import summary ("" when absent)
};

// The directory holds a Hugging Face model: a config.json.
bool is_hf_model_dir(const std::string& path);

// Reads and checks DIR/config.json. Errors name the file and the key.
Result<HfConfig> read_hf_config(const std::string& dir);

}  // namespace tandem::host::hub
