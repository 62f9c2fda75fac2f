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
#include "checkpoint/float_tensors.hpp"
#include "hub/hf_config.hpp"
#include "hub/hf_names.hpp"
#include "hub/hf_weights.hpp"

namespace tandem::host::exporting {
namespace {

namespace fs = std::filesystem;
using checkpoint::Checkpoint;
using checkpoint::TensorRecord;
using hub::Family;
using hub::HfConfig;

const float* floats(const TensorRecord& t) {
  return reinterpret_cast<const float*>(t.data.data());
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
    // q, k and v [each, in] side by side as the columns of a Conv1D [in, 3·each].
    const std::vector<float> columns =
        weight ? hub::transposed_columns(floats(*parts[size_t(p)]), each, in, 0, in)
               : std::vector<float>(floats(*parts[size_t(p)]), floats(*parts[size_t(p)]) + each);
    for (int64_t r = 0; r < in; ++r)
      std::memcpy(out.data() + r * 3 * each + p * each, columns.data() + r * each, size_t(each) * 4);
  }
  return hub::f32_record(std::move(hf),
                         weight ? std::vector<int64_t>{in, 3 * each} : std::vector<int64_t>{3 * each}, out);
}

// The exported tensors of `weights` (Tandem's names) for the family of `config`.
Result<Checkpoint> hf_tensors(const Checkpoint& weights, const std::string& file, const HfConfig& config) {
  Checkpoint out;
  out.metadata["format"] = "pt";  // transformers loads safetensors files that say so
  for (const TensorRecord& t : weights.tensors) {
    if (t.name.rfind("optim.", 0) == 0 || t.shape.empty()) continue;  // optimizer state, step counters
    const hub::NameRule* rule = hub::rule_for_tandem(config.family, t.name);
    if (rule == nullptr)
      return make_error(file + ": tensor '" + t.name + "' belongs to no layer of a " + config.model_type +
                            " model under Hugging Face's names (is this the model `tandem import` made?)",
                        TDM_UNSUPPORTED);
    if (t.dtype != TDM_F32) return make_error(file + ": tensor '" + t.name + "' is not f32", TDM_UNSUPPORTED);
    if (config.tied && t.name == "lm_head.weight") continue;
    const std::string hf =
        hub::with_hf_prefix(config.family, std::regex_replace(t.name, rule->tandem, rule->hf_from));
    if (rule->layout == hub::Layout::packed_qkv) {
      if (t.name.find(".attn.q.") == std::string::npos) continue;  // k and v: packed with q
      auto p = packed(weights, t.name, hf, file);
      if (!p) return p.error();
      out.tensors.push_back(std::move(*p));
    } else if (rule->layout == hub::Layout::transposed) {
      out.tensors.push_back(
          hub::f32_record(hf, {t.shape[1], t.shape[0]},
                          hub::transposed_columns(floats(t), t.shape[0], t.shape[1], 0, t.shape[1])));
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
  // That one tensor, under either of its stored names.
  auto source = hub::read_hf_weights(config.dir, [](const std::string& name) {
    return name == "wpe.weight" || name == "transformer.wpe.weight";
  });
  if (!source) return source.error();
  if (auto r = checkpoint::widen_to_f32(*source, config.dir); !r) return r;
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
  if (const hub::NameRule* r = hub::rule_for_tandem(config.family, tandem)) {
    if (r->layout == hub::Layout::packed_qkv)
      return make_error(
          "'" + tandem + "' is packed with k and v into GPT-2's c_attn, which has no name of its own",
          TDM_UNSUPPORTED);
    return hub::with_hf_prefix(config.family, std::regex_replace(tandem, r->tandem, r->hf_from));
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
