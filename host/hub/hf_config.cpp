#include "hub/hf_config.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tandem::host::hub {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Reads keys of one config.json; its errors name the file and the key.
class Keys {
 public:
  Keys(const json& j, std::string file) : j_(j), file_(std::move(file)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  std::string text(const char* key) const { return has(key) ? j_.at(key).dump() : "null"; }

  Result<int64_t> count(const char* key, std::optional<int64_t> fallback = std::nullopt) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      return error(std::string("has no \"") + key + "\", which a model of this family needs");
    }
    const json& v = j_.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 1)
      return error(std::string("\"") + key + "\" = " + v.dump() + " is not a positive integer");
    return v.get<int64_t>();
  }
  Result<double> number(const char* key, double fallback, bool positive) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_number() || (positive ? v.get<double>() <= 0 : v.get<double>() < 0))
      return error(std::string("\"") + key + "\" = " + v.dump() + " is not a " +
                   (positive ? "positive number" : "number of 0 or more"));
    return v.get<double>();
  }
  Result<bool> flag(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_boolean())
      return error(std::string("\"") + key + "\" = " + text(key) + " is not true or false");
    return j_.at(key).get<bool>();
  }
  Result<std::string> string(const char* key, const char* fallback) const {
    if (!has(key)) return std::string(fallback);
    if (!j_.at(key).is_string())
      return error(std::string("\"") + key + "\" = " + text(key) + " is not a string");
    return j_.at(key).get<std::string>();
  }
  // The keys of an object-valued key (rope_scaling), their errors naming it.
  Keys nested(const char* key) const { return Keys(j_.at(key), file_ + ": \"" + key + "\""); }
  bool is_object(const char* key) const { return has(key) && j_.at(key).is_object(); }
  // A key whose value Tandem cannot express.
  Error refuse(const char* key, const std::string& why) const {
    return error(std::string("\"") + key + "\" = " + text(key) + ": " + why);
  }
  Error error(const std::string& what) const { return make_error(file_ + ": " + what, TDM_UNSUPPORTED); }

 private:
  const json& j_;
  std::string file_;
};

// Unwraps the Result of a Keys read into `out`, or returns its error.
#define TANDEM_HF_READ(out, expr)     \
  do {                                \
    auto read_ = (expr);              \
    if (!read_) return read_.error(); \
    out = *read_;                     \
  } while (0)

Result<void> read_gpt2(const Keys& k, HfConfig& c) {
  TANDEM_HF_READ(c.vocab_size, k.count("vocab_size"));
  TANDEM_HF_READ(c.hidden, k.count("n_embd"));
  TANDEM_HF_READ(c.layers, k.count("n_layer"));
  TANDEM_HF_READ(c.heads, k.count("n_head"));
  TANDEM_HF_READ(c.max_positions, k.count("n_positions"));
  TANDEM_HF_READ(c.intermediate, k.count("n_inner", 4 * c.hidden));
  TANDEM_HF_READ(c.norm_epsilon, k.number("layer_norm_epsilon", 1e-5, true));
  TANDEM_HF_READ(c.tied, k.flag("tie_word_embeddings", true));
  TANDEM_HF_READ(c.attention_dropout, k.number("attn_pdrop", 0.1, false));
  TANDEM_HF_READ(c.residual_dropout, k.number("resid_pdrop", 0.1, false));
  TANDEM_HF_READ(c.embedding_dropout, k.number("embd_pdrop", 0.1, false));
  std::string act;
  TANDEM_HF_READ(act, k.string("activation_function", "gelu_new"));
  if (act == "gelu_new" || act == "gelu_pytorch_tanh")
    c.gelu_approximate = "tanh";
  else if (act == "gelu")
    c.gelu_approximate = "none";
  else
    return k.refuse("activation_function",
                    "Tandem's GPT-2 blocks use GELU, exact (\"gelu\") or with the tanh "
                    "approximation (\"gelu_new\")");
  bool flag = false;
  TANDEM_HF_READ(flag, k.flag("scale_attn_weights", true));
  if (!flag) return k.refuse("scale_attn_weights", "attention without the 1/sqrt(head_dim) scale");
  TANDEM_HF_READ(flag, k.flag("scale_attn_by_inverse_layer_idx", false));
  if (flag) return k.refuse("scale_attn_by_inverse_layer_idx", "a scale per block is not expressible");
  TANDEM_HF_READ(flag, k.flag("add_cross_attention", false));
  if (flag) return k.refuse("add_cross_attention", "cross-attention is not a Tandem layer");
  c.kv_heads = c.heads;
  c.qkv_bias = c.out_bias = c.mlp_bias = true;
  return {};
}

// Llama 3.1's rope scaling, the one Tandem's rope op has; other kinds
// (linear, dynamic, yarn, longrope) are refused naming theirs.
Result<void> read_rope_scaling(const Keys& k, HfConfig& c) {
  if (!k.is_object("rope_scaling")) return k.refuse("rope_scaling", "is not an object");
  const Keys r = k.nested("rope_scaling");
  std::string type;
  TANDEM_HF_READ(type, r.string(r.has("rope_type") ? "rope_type" : "type", ""));
  if (type == "default") return {};  // transformers' spelling of no scaling
  if (type != "llama3")
    return r.refuse(r.has("rope_type") ? "rope_type" : "type",
                    "Tandem's rope scales frequencies as Llama 3.1 does (\"llama3\") and no other way");
  c.rope_scaling.llama3 = true;
  TANDEM_HF_READ(c.rope_scaling.factor, r.number("factor", 8.0, true));
  TANDEM_HF_READ(c.rope_scaling.low_freq_factor, r.number("low_freq_factor", 1.0, true));
  TANDEM_HF_READ(c.rope_scaling.high_freq_factor, r.number("high_freq_factor", 4.0, true));
  TANDEM_HF_READ(c.rope_scaling.original_context, r.count("original_max_position_embeddings", 8192));
  if (!(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor))
    return r.refuse("high_freq_factor", "must be above low_freq_factor");
  return {};
}

Result<void> read_llama(const Keys& k, HfConfig& c) {
  TANDEM_HF_READ(c.vocab_size, k.count("vocab_size"));
  TANDEM_HF_READ(c.hidden, k.count("hidden_size"));
  TANDEM_HF_READ(c.layers, k.count("num_hidden_layers"));
  TANDEM_HF_READ(c.heads, k.count("num_attention_heads"));
  TANDEM_HF_READ(c.kv_heads, k.count("num_key_value_heads", c.heads));
  TANDEM_HF_READ(c.intermediate, k.count("intermediate_size"));
  TANDEM_HF_READ(c.max_positions, k.count("max_position_embeddings"));
  TANDEM_HF_READ(c.norm_epsilon, k.number("rms_norm_eps", 1e-6, true));
  TANDEM_HF_READ(c.rope_theta, k.number("rope_theta", 10000.0, true));
  TANDEM_HF_READ(c.tied, k.flag("tie_word_embeddings", false));
  TANDEM_HF_READ(c.attention_dropout, k.number("attention_dropout", 0.0, false));
  if (c.heads % c.kv_heads != 0)
    return k.refuse("num_key_value_heads", "does not divide num_attention_heads");
  if (k.has("head_dim")) {
    TANDEM_HF_READ(c.head_dim, k.count("head_dim"));
  } else if (c.hidden % c.heads != 0) {
    return k.refuse("num_attention_heads", "does not divide hidden_size, and there is no head_dim");
  }
  if (k.has("rope_scaling"))
    if (auto r = read_rope_scaling(k, c); !r) return r;
  std::string act;
  TANDEM_HF_READ(act, k.string("hidden_act", "silu"));
  if (act != "silu") return k.refuse("hidden_act", "the MLP of this family in Tandem is SwiGLU (\"silu\")");
  if (c.model_type == "qwen2") {
    c.qkv_bias = true;  // Qwen2's q, k and v projections have biases, its output projection none
    bool windowed = false;
    TANDEM_HF_READ(windowed, k.flag("use_sliding_window", false));
    if (windowed) return k.refuse("use_sliding_window", "Tandem's attention sees the whole context");
  } else {
    TANDEM_HF_READ(c.qkv_bias, k.flag("attention_bias", false));
    c.out_bias = c.qkv_bias;
    TANDEM_HF_READ(c.mlp_bias, k.flag("mlp_bias", false));
  }
  if (c.model_type == "mistral" && k.has("sliding_window"))
    TANDEM_HF_READ(c.sliding_window, k.count("sliding_window"));
  for (const char* key : {"num_experts", "num_local_experts", "moe_intermediate_size"})
    if (k.has(key)) return k.refuse(key, "mixtures of experts are not Tandem layers");
  return {};
}

}  // namespace

bool is_hf_model_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

Result<HfConfig> read_hf_config(const std::string& dir) {
  const std::string file = (fs::path(dir) / "config.json").string();
  std::ifstream in(file);
  if (!in)
    return make_error(file + ": cannot read it (is " + dir + " a Hugging Face model directory?)",
                      TDM_NOT_FOUND);
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(file + ": is not a JSON object (damaged? download it again)", TDM_INVALID_ARGUMENT);
  const Keys keys(j, file);
  HfConfig c;
  c.dir = dir;
  TANDEM_HF_READ(c.model_type, keys.string("model_type", ""));
  TANDEM_HF_READ(c.torch_dtype, keys.string("torch_dtype", ""));
  Result<void> read;
  if (c.model_type == "gpt2") {
    c.family = Family::gpt2;
    read = read_gpt2(keys, c);
  } else if (c.model_type == "llama" || c.model_type == "mistral" || c.model_type == "qwen2") {
    read = read_llama(keys, c);
  } else {
    return keys.refuse("model_type", "tandem import reads the gpt2, llama, mistral and qwen2 families");
  }
  if (!read) return read.error();
  if (c.head_dim == 0) c.head_dim = c.hidden / c.heads;
  return c;
}

}  // namespace tandem::host::hub
