#include "hub/hf_names.hpp"

#include <cstring>

namespace tandem::host::hub {
namespace {

// One row of a family's table: both names as templates in which "{k}"
// stands for the k-th of `holes` (a regex), in any order on either side.
struct Entry {
  const char* hf;
  const char* tandem;  // "" for a skipped buffer
  std::vector<const char*> holes;
  Layout layout;
};

// The template as a regex (its holes captured in order of appearance) and
// the order in which its holes appear.
std::pair<std::string, std::vector<int>> pattern(const std::string& t,
                                                 const std::vector<const char*>& holes) {
  std::string re;
  std::vector<int> order;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '{') {
      const int k = t[i + 1] - '0';
      order.push_back(k);
      re += std::string("(") + holes[size_t(k)] + ")";
      i += 2;
    } else if (t[i] == '%') {
      re += "[qkv]";  // the three tensors packed into one
    } else {
      if (t[i] == '.') re += '\\';
      re += t[i];
    }
  }
  return {re, order};
}

// The template as a std::regex_replace format for a match of a template
// whose holes appeared in `order`.
std::string format(const std::string& t, const std::vector<int>& order) {
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] != '{') {
      out += t[i];
      continue;
    }
    const int k = t[i + 1] - '0';
    for (size_t at = 0; at < order.size(); ++at)
      if (order[at] == k) out += "$" + std::to_string(at + 1);
    i += 2;
  }
  return out;
}

std::vector<NameRule> compile(const std::vector<Entry>& entries) {
  std::vector<NameRule> rules;
  for (const Entry& e : entries) {
    const auto [hf_re, hf_order] = pattern(e.hf, e.holes);
    const auto [tandem_re, tandem_order] = pattern(e.tandem, e.holes);
    NameRule r;
    r.hf = std::regex(hf_re);
    r.tandem_from = format(e.tandem, hf_order);
    r.tandem = std::regex(e.layout == Layout::skipped ? std::string("(?!)") : tandem_re);
    r.hf_from = format(e.hf, tandem_order);
    r.layout = e.layout;
    rules.push_back(std::move(r));
  }
  return rules;
}

const char* const kBlock = R"(\d+)";

const std::vector<NameRule>& gpt2_rules() {
  static const std::vector<NameRule> rules = compile({
      {"wte.weight", "wte.weight", {}, Layout::same},
      {"wpe.weight", "wpe.weight", {}, Layout::same},
      {"h.{0}.{1}.weight", "h.{0}.{1}.gamma", {kBlock, "ln_[12]"}, Layout::same},
      {"h.{0}.{1}.bias", "h.{0}.{1}.beta", {kBlock, "ln_[12]"}, Layout::same},
      {"h.{0}.attn.c_attn.{1}", "h.{0}.attn.%.{1}", {kBlock, "weight|bias"}, Layout::packed_qkv},
      {"h.{0}.attn.c_proj.weight", "h.{0}.attn.out.weight", {kBlock}, Layout::transposed},
      {"h.{0}.attn.c_proj.bias", "h.{0}.attn.out.bias", {kBlock}, Layout::same},
      {"h.{0}.mlp.{1}.weight", "h.{0}.{1}.weight", {kBlock, "c_fc|c_proj"}, Layout::transposed},
      {"h.{0}.mlp.{1}.bias", "h.{0}.{1}.bias", {kBlock, "c_fc|c_proj"}, Layout::same},
      {"ln_f.weight", "ln_f.gamma", {}, Layout::same},
      {"ln_f.bias", "ln_f.beta", {}, Layout::same},
      {"lm_head.weight", "lm_head.weight", {}, Layout::same},
      {"h.{0}.attn.{1}", "", {kBlock, "bias|masked_bias"}, Layout::skipped},
  });
  return rules;
}

const std::vector<NameRule>& llama_rules() {
  static const std::vector<NameRule> rules = compile({
      {"embed_tokens.weight", "embed_tokens.weight", {}, Layout::same},
      {"layers.{0}.{1}.weight",
       "layers.{0}.{1}.gamma",
       {kBlock, "input_layernorm|post_attention_layernorm"},
       Layout::same},
      {"layers.{0}.self_attn.{1}_proj.{2}",
       "layers.{0}.self_attn.{1}.{2}",
       {kBlock, "[qkv]", "weight|bias"},
       Layout::same},
      {"layers.{0}.self_attn.o_proj.{1}",
       "layers.{0}.self_attn.out.{1}",
       {kBlock, "weight|bias"},
       Layout::same},
      {"layers.{0}.mlp.{1}.{2}",
       "layers.{0}.{1}.{2}",
       {kBlock, "gate_proj|up_proj|down_proj", "weight|bias"},
       Layout::same},
      {"norm.weight", "norm.gamma", {}, Layout::same},
      {"lm_head.weight", "lm_head.weight", {}, Layout::same},
      {"layers.{0}.self_attn.rotary_emb.inv_freq", "", {kBlock}, Layout::skipped},
  });
  return rules;
}

}  // namespace

const std::vector<NameRule>& name_rules(Family family) {
  return family == Family::gpt2 ? gpt2_rules() : llama_rules();
}

const NameRule* rule_for_hf(Family family, const std::string& name) {
  for (const NameRule& r : name_rules(family))
    if (std::regex_match(name, r.hf)) return &r;
  return nullptr;
}

const NameRule* rule_for_tandem(Family family, const std::string& name) {
  for (const NameRule& r : name_rules(family))
    if (std::regex_match(name, r.tandem)) return &r;
  return nullptr;
}

std::string hf_prefix(Family family) {
  return family == Family::gpt2 ? "transformer." : "model.";
}

std::string with_hf_prefix(Family family, const std::string& name) {
  return name == "lm_head.weight" ? name : hf_prefix(family) + name;
}

checkpoint::TensorRecord f32_record(std::string name, std::vector<int64_t> shape,
                                    const std::vector<float>& values) {
  checkpoint::TensorRecord t{std::move(name), TDM_F32, std::move(shape),
                             std::vector<std::byte>(values.size() * 4)};
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

std::vector<float> transposed_columns(const float* m, int64_t rows, int64_t cols, int64_t first,
                                      int64_t count) {
  std::vector<float> out(size_t(rows * count));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < count; ++c) out[size_t(c * rows + r)] = m[r * cols + first + c];
  return out;
}

}  // namespace tandem::host::hub
