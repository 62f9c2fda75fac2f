#include "export/hf_export.hpp"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "checkpoint/atomic_file.hpp"
#include "hub/hf_config.hpp"
#include "hub/hf_weights.hpp"

namespace tandem::host::exporting {
namespace {

namespace fs = std::filesystem;
using checkpoint::Checkpoint;
using checkpoint::TensorRecord;
using hub::Family;
using hub::HfConfig;

enum class Layout { same, transposed, packed_qkv };

struct Rule {
  std::regex tandem;
  std::string hf;  // std::regex_replace format
  Layout layout;
};

std::vector<Rule> gpt2_rules() {
  return {{std::regex(R"((wte|wpe)\.weight)"), "transformer.$1.weight", Layout::same},
          {std::regex(R"((h\.\d+\.ln_[12]|ln_f)\.gamma)"), "transformer.$1.weight", Layout::same},
          {std::regex(R"((h\.\d+\.ln_[12]|ln_f)\.beta)"), "transformer.$1.bias", Layout::same},
          {std::regex(R"(h\.(\d+)\.attn\.q\.(weight|bias))"), "transformer.h.$1.attn.c_attn.$2",
           Layout::packed_qkv},
          {std::regex(R"(h\.\d+\.attn\.[kv]\.(weight|bias))"), "", Layout::packed_qkv},  // packed with q
          {std::regex(R"(h\.(\d+)\.attn\.out\.weight)"), "transformer.h.$1.attn.c_proj.weight",
           Layout::transposed},
          {std::regex(R"(h\.(\d+)\.attn\.out\.bias)"), "transformer.h.$1.attn.c_proj.bias", Layout::same},
          {std::regex(R"(h\.(\d+)\.(c_fc|c_proj)\.weight)"), "transformer.h.$1.mlp.$2.weight",
           Layout::transposed},
          {std::regex(R"(h\.(\d+)\.(c_fc|c_proj)\.bias)"), "transformer.h.$1.mlp.$2.bias", Layout::same},
          {std::regex(R"(lm_head\.weight)"), "lm_head.weight", Layout::same}};
}

std::vector<Rule> llama_rules() {
  return {{std::regex(R"(embed_tokens\.weight)"), "model.embed_tokens.weight", Layout::same},
          {std::regex(R"((layers\.\d+\.(input_layernorm|post_attention_layernorm)|norm)\.gamma)"),
           "model.$1.weight", Layout::same},
          {std::regex(R"(layers\.(\d+)\.self_attn\.([qkv])\.(weight|bias))"),
           "model.layers.$1.self_attn.$2_proj.$3", Layout::same},
          {std::regex(R"(layers\.(\d+)\.self_attn\.out\.(weight|bias))"),
           "model.layers.$1.self_attn.o_proj.$2", Layout::same},
          {std::regex(R"(layers\.(\d+)\.(gate_proj|up_proj|down_proj)\.(weight|bias))"),
           "model.layers.$1.mlp.$2.$3", Layout::same},
          {std::regex(R"(lm_head\.weight)"), "lm_head.weight", Layout::same}};
}

const float* floats(const TensorRecord& t) {
  return reinterpret_cast<const float*>(t.data.data());
}

// [rows, cols] -> [cols, rows], into `out` at column offset `first` of `width` columns.
void transpose_into(const TensorRecord& t, std::vector<float>& out, int64_t width, int64_t first) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[size_t(c * width + first + r)] = floats(t)[r * cols + c];
}

TensorRecord record(std::string name, std::vector<int64_t> shape, const std::vector<float>& v) {
  TensorRecord t{std::move(name), TDM_F32, std::move(shape), std::vector<std::byte>(v.size() * 4)};
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

// GPT-2's c_attn of q, k and v: weights [C, 3C] (Conv1D: columns are outputs), biases [3C].
Result<TensorRecord> packed(const Checkpoint& cp, const std::string& q_name, std::string hf,
                            const std::string& file) {
  std::vector<const TensorRecord*> parts;
  for (char which : std::string("qkv")) {
    std::string name = q_name;
    name[name.rfind(".q.") + 1] = which;
    const TensorRecord* t = cp.find(name);
    if (t == nullptr)
      return make_error(file + ": has '" + q_name + "' but no '" + name + "'", TDM_INVALID_ARGUMENT);
    parts.push_back(t);
  }
  const bool weight = parts[0]->shape.size() == 2;
  const int64_t each = parts[0]->shape[0], in = weight ? parts[0]->shape[1] : 1;
  std::vector<float> out(size_t(3 * each * in));
  for (int p = 0; p < 3; ++p) {
    if (parts[size_t(p)]->shape != parts[0]->shape)
      return make_error(file + ": q, k and v of '" + q_name + "' differ in shape", TDM_INVALID_ARGUMENT);
    if (weight)
      transpose_into(*parts[size_t(p)], out, 3 * each, p * each);
    else
      std::memcpy(out.data() + p * each, floats(*parts[size_t(p)]), size_t(each) * 4);
  }
  return record(std::move(hf), weight ? std::vector<int64_t>{in, 3 * each} : std::vector<int64_t>{3 * each},
                out);
}

// The exported tensors of `weights` (Tandem's names) for the family of `config`.
Result<Checkpoint> hf_tensors(const Checkpoint& weights, const std::string& file, const HfConfig& config) {
  const bool gpt2 = config.family == Family::gpt2;
  const std::vector<Rule> rules = gpt2 ? gpt2_rules() : llama_rules();
  Checkpoint out;
  out.metadata["format"] = "pt";  // transformers loads safetensors files that say so
  for (const TensorRecord& t : weights.tensors) {
    if (t.name.rfind("optim.", 0) == 0 || t.shape.empty()) continue;  // optimizer state, step counters
    const Rule* rule = nullptr;
    for (const Rule& r : rules)
      if (std::regex_match(t.name, r.tandem)) rule = &r;
    if (rule == nullptr)
      return make_error(file + ": tensor '" + t.name + "' belongs to no layer of a " + config.model_type +
                            " model under Hugging Face's names (is this the model `tandem import` made?)",
                        TDM_UNSUPPORTED);
    if (t.dtype != TDM_F32) return make_error(file + ": tensor '" + t.name + "' is not f32", TDM_UNSUPPORTED);
    if (config.tied && t.name == "lm_head.weight") continue;
    const std::string hf = std::regex_replace(t.name, rule->tandem, rule->hf);
    if (rule->layout == Layout::packed_qkv) {
      if (hf.empty()) continue;  // k and v: with q
      auto p = packed(weights, t.name, hf, file);
      if (!p) return p.error();
      out.tensors.push_back(std::move(*p));
    } else if (rule->layout == Layout::transposed) {
      std::vector<float> v(t.data.size() / 4);
      transpose_into(t, v, t.shape[0], 0);
      out.tensors.push_back(record(hf, {t.shape[1], t.shape[0]}, v));
    } else {
      out.tensors.push_back(TensorRecord{hf, t.dtype, t.shape, t.data});
    }
  }
  return out;
}

// GPT-2 trained at a shorter context than its positions: the rows it did
// not train come from the directory it was imported from.
Result<void> complete_positions(Checkpoint& out, const HfConfig& config) {
  TensorRecord* wpe = nullptr;
  for (TensorRecord& t : out.tensors)
    if (t.name == "transformer.wpe.weight") wpe = &t;
  if (wpe == nullptr || wpe->shape[0] >= config.max_positions) return {};
  auto source = hub::read_hf_weights(config.dir);
  if (!source) return source.error();
  const TensorRecord* whole = source->find("wpe.weight");
  if (whole == nullptr || whole->shape != std::vector<int64_t>{config.max_positions, wpe->shape[1]})
    return make_error(config.dir + ": has no position table of " + std::to_string(config.max_positions) +
                          " rows to complete the exported one",
                      TDM_INVALID_ARGUMENT);
  std::vector<std::byte> data = whole->data;
  std::memcpy(data.data(), wpe->data.data(), wpe->data.size());
  wpe->data = std::move(data);
  wpe->shape = whole->shape;
  return {};
}

Result<void> write_config(const std::string& source, const std::string& to) {
  std::ifstream in(source);
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded()) return make_error(source + ": is not JSON", TDM_INVALID_ARGUMENT);
  j["torch_dtype"] = "float32";  // the weights as Tandem trained them
  const std::string out = j.dump(2) + "\n";
  return checkpoint::write_file_atomically(to, {out});
}

}  // namespace

Result<void> write_directory(const std::string& output_dir,
                             const std::function<Result<void>(const std::string& staging)>& fill) {
  const fs::path out = fs::absolute(output_dir).lexically_normal();
  const std::string stem = "." + out.filename().string() + "." + std::to_string(getpid());
  const fs::path staging = out.parent_path() / (stem + ".partial"), old = out.parent_path() / (stem + ".old");
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec)
    return make_error(staging.string() + ": cannot create (" + ec.message() + ")", TDM_INVALID_ARGUMENT);
  auto filled = fill(staging.string());
  if (filled) {
    // OUTPUT is replaced only now, whole: the old one moves aside until the new one is in place.
    const bool replacing = fs::exists(out);
    if (replacing) fs::rename(out, old, ec);
    if (!ec) fs::rename(staging, out, ec);
    if (!ec) {
      fs::remove_all(old, ec);
      return {};
    }
    const std::string why = ec.message();
    if (replacing && !fs::exists(out)) fs::rename(old, out, ec);  // the previous export back
    filled =
        make_error(out.string() + ": cannot put the export in place (" + why + ")", TDM_INVALID_ARGUMENT);
  }
  fs::remove_all(staging, ec);
  return filled;
}

Result<std::string> hf_name(const std::string& tandem, const HfConfig& config) {
  for (const Rule& r : config.family == Family::gpt2 ? gpt2_rules() : llama_rules())
    if (std::regex_match(tandem, r.tandem)) {
      if (r.layout == Layout::packed_qkv)
        return make_error(
            "'" + tandem + "' is packed with k and v into GPT-2's c_attn, which has no name of its own",
            TDM_UNSUPPORTED);
      return std::regex_replace(tandem, r.tandem, r.hf);
    }
  return make_error("'" + tandem + "' has no Hugging Face name in a " + config.model_type + " model",
                    TDM_UNSUPPORTED);
}

Result<HfExport> export_hf(const Checkpoint& weights, const std::string& weights_path,
                           const std::string& source_dir, const std::string& output_dir) {
  auto config = hub::read_hf_config(source_dir);
  if (!config) return config.error();
  auto tensors = hf_tensors(weights, weights_path, *config);
  if (!tensors) return tensors.error();
  if (auto r = complete_positions(*tensors, *config); !r) return r.error();
  HfExport done{tensors->tensors.size(), {}};
  auto fill = [&](const std::string& staging) -> Result<void> {
    if (auto r = checkpoint::write_safetensors(staging + "/model.safetensors", *tensors); !r) return r;
    if (auto r = write_config((fs::path(source_dir) / "config.json").string(), staging + "/config.json"); !r)
      return r;
    std::error_code ec;
    for (const char* name :
         {"generation_config.json", "tokenizer.json", "tokenizer.model", "tokenizer_config.json",
          "special_tokens_map.json", "vocab.json", "merges.txt", "added_tokens.json"}) {
      const fs::path from = fs::path(source_dir) / name;
      if (!fs::exists(from)) continue;
      fs::copy_file(from, fs::path(staging) / name, fs::copy_options::overwrite_existing, ec);
      if (ec) return make_error(from.string() + ": cannot copy (" + ec.message() + ")", TDM_INVALID_ARGUMENT);
      done.copied.push_back(name);
    }
    return {};
  };
  if (auto r = write_directory(output_dir, fill); !r) return r.error();
  return done;
}

}  // namespace tandem::host::exporting
