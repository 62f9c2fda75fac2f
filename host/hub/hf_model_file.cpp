#include "hub/hf_model_file.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

namespace tandem::host::hub {
namespace {

// A TOML float: always with a '.' or an exponent, so that it reads back as one.
std::string real(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  std::string s = text;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// A TOML string of any text: literal ('...') when it can be, else escaped.
std::string quoted(const std::string& text) {
  if (text.find_first_of("'\n\r") == std::string::npos) return "'" + text + "'";
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n' || ch == '\r') {
      out += ch == '\n' ? "\\n" : "\\r";
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

std::string flag(bool v) {
  return v ? "true" : "false";
}

// Writes [[layers]] or [[layers.body]] tables.
class Layers {
 public:
  explicit Layers(std::ostringstream& out) : out_(out) {}

  Layers& layer(const std::string& name, const std::string& op, bool body = false) {
    body_ = body;
    out_ << "\n" << indent() << (body ? "[[layers.body]]\n" : "[[layers]]\n");
    return key("name", "\"" + name + "\"").key("op", "\"" + op + "\"");
  }
  Layers& key(const std::string& k, const std::string& v) {
    out_ << indent() << k << " = " << v << "\n";
    return *this;
  }
  Layers& key(const std::string& k, int64_t v) { return key(k, std::to_string(v)); }
  Layers& inputs(const std::string& a, const std::string& b = "") {
    return key("inputs", "[\"" + a + (b.empty() ? "" : "\", \"" + b) + "\"]");
  }
  // A dropout layer when the family trains with one.
  void dropout(const std::string& name, double p, bool body) {
    if (p > 0) layer(name, "dropout", body).key("p", real(p));
  }

 private:
  std::string indent() const { return body_ ? "  " : ""; }
  std::ostringstream& out_;
  bool body_ = false;
};

void gpt2_layers(const HfConfig& c, Layers& l) {
  l.layer("wte", "embedding").key("num_embeddings", c.vocab_size).key("embedding_dim", c.hidden);
  l.layer("wpe", "position_embedding").key("max_positions", c.max_positions);
  l.dropout("embedding_dropout", c.embedding_dropout, false);
  l.layer("h", "repeat").key("count", c.layers);
  l.layer("ln_1", "layer_norm", true).key("epsilon", real(c.norm_epsilon));
  l.layer("attn", "attention", true).key("heads", c.heads).key("causal", "true");
  if (c.attention_dropout > 0) l.key("dropout", real(c.attention_dropout));
  l.dropout("attn_dropout", c.residual_dropout, true);
  l.layer("attn_residual", "add", true).inputs("h", c.residual_dropout > 0 ? "attn_dropout" : "attn");
  l.layer("ln_2", "layer_norm", true).key("epsilon", real(c.norm_epsilon));
  l.layer("c_fc", "linear", true).key("out_features", c.intermediate);
  l.layer("gelu", "gelu", true).key("approximate", "\"" + c.gelu_approximate + "\"");
  l.layer("c_proj", "linear", true).key("out_features", c.hidden);
  l.dropout("mlp_dropout", c.residual_dropout, true);
  l.layer("mlp_residual", "add", true)
      .inputs("attn_residual", c.residual_dropout > 0 ? "mlp_dropout" : "c_proj");
  l.layer("ln_f", "layer_norm").key("epsilon", real(c.norm_epsilon));
}

void llama_layers(const HfConfig& c, Layers& l) {
  l.layer("embed_tokens", "embedding").key("num_embeddings", c.vocab_size).key("embedding_dim", c.hidden);
  l.layer("layers", "repeat").key("count", c.layers);
  l.layer("input_layernorm", "rms_norm", true).key("epsilon", real(c.norm_epsilon));
  l.layer("self_attn", "attention", true).key("heads", c.heads).key("kv_heads", c.kv_heads);
  l.key("head_dim", c.head_dim)
      .key("causal", "true")
      .key("rope", "true")
      .key("rope_base", real(c.rope_theta));
  if (c.rope_scaling.llama3)
    l.key("rope_scaling", "\"llama3\"")
        .key("rope_factor", real(c.rope_scaling.factor))
        .key("rope_low_freq_factor", real(c.rope_scaling.low_freq_factor))
        .key("rope_high_freq_factor", real(c.rope_scaling.high_freq_factor))
        .key("rope_original_context", c.rope_scaling.original_context);
  l.key("bias", flag(c.qkv_bias)).key("out_bias", flag(c.out_bias));
  if (c.attention_dropout > 0) l.key("dropout", real(c.attention_dropout));
  l.layer("attn_residual", "add", true).inputs("layers", "self_attn");
  l.layer("post_attention_layernorm", "rms_norm", true).key("epsilon", real(c.norm_epsilon));
  l.layer("gate_proj", "linear", true).key("out_features", c.intermediate).key("bias", flag(c.mlp_bias));
  l.layer("up_proj", "linear", true).key("out_features", c.intermediate).key("bias", flag(c.mlp_bias));
  l.inputs("post_attention_layernorm");
  l.layer("act", "silu", true).inputs("gate_proj");
  l.layer("gated", "mul", true).inputs("act", "up_proj");
  l.layer("down_proj", "linear", true).key("out_features", c.hidden).key("bias", flag(c.mlp_bias));
  l.layer("mlp_residual", "add", true).inputs("attn_residual", "down_proj");
  l.layer("norm", "rms_norm").key("epsilon", real(c.norm_epsilon));
}

}  // namespace

Result<std::string> hf_model_file(const HfConfig& c, const ImportOptions& o) {
  const int64_t context = o.context > 0 ? o.context : std::min<int64_t>(c.max_positions, 1024);
  if (context > c.max_positions)
    return make_error("--context " + std::to_string(context) + ": the model has " +
                          std::to_string(c.max_positions) + " positions (" + c.dir + "/config.json)",
                      TDM_INVALID_ARGUMENT);
  if (c.sliding_window > 0 && context > c.sliding_window)
    return make_error(c.dir + "/config.json: \"sliding_window\" = " + std::to_string(c.sliding_window) +
                          " is shorter than the context " + std::to_string(context) +
                          ", and Tandem's attention sees the whole context: import with --context " +
                          std::to_string(c.sliding_window) + " or less",
                      TDM_UNSUPPORTED);
  std::filesystem::path absolute = std::filesystem::absolute(c.dir).lexically_normal();
  if (absolute.filename().empty()) absolute = absolute.parent_path();  // given as "dir/"
  const std::string name = o.name.empty() ? absolute.filename().string() : o.name;
  const bool gpt2 = c.family == Family::gpt2;
  std::ostringstream out;
  out << "# " << name << ": a " << c.model_type << " model imported from " << c.dir
      << " by `tandem import`.\n"
      << "# Its weights are read from that directory, under the names of these layers:\n"
      << "#   tandem train THIS.toml --init-from " << c.dir << " --set data.train_tokens=train.bin\n"
      << "#   tandem generate THIS.toml --weights " << c.dir << "\n"
      << "# " << c.layers << " blocks, width " << c.hidden << ", " << c.heads << " heads"
      << (c.kv_heads != c.heads ? " (" + std::to_string(c.kv_heads) + " key/value heads)" : std::string())
      << ", vocabulary " << c.vocab_size << (c.torch_dtype.empty() ? "" : ", stored as " + c.torch_dtype)
      << ".\n\n[model]\nname = " << quoted(name) << "\ntask = \"language_model\"\ncontext = " << context
      << "\nvocab_size = " << c.vocab_size << "\nhf_dir = " << quoted(absolute.string())
      << "  # its configuration and tokenizer, for export --format hf\n";
  Layers layers(out);
  if (gpt2)
    gpt2_layers(c, layers);
  else
    llama_layers(c, layers);
  const std::string embedding = gpt2 ? "wte" : "embed_tokens";
  layers.layer("lm_head", "linear").key("out_features", c.vocab_size).key("bias", "false");
  if (c.tied) layers.key("tie_weight", "\"" + embedding + "\"");
  out << "\n# Fine-tuning: a small learning rate from the imported weights.\n"
      << "[train]\noptimizer = \"adamw\"\nlr = 2e-5\nweight_decay = 0.0\nschedule = \"cosine\"\n"
      << "warmup_steps = 20\nbatch_size = 4\nsteps = 1000\nclip_grad_norm = 1.0\nlog_every = 10\nseed = 1\n"
      << "\n# Token ids, as `tandem tokenize` writes them.\n"
      << "[data]\nformat = \"tokens\"\ntrain_tokens = \"train.bin\"\ntoken_dtype = \""
      << (c.vocab_size <= 65536 ? "u16" : "u32") << "\"\nvalidation_split = 0.05\n";
  return out.str();
}

}  // namespace tandem::host::hub
