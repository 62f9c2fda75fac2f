#include "hub/hf_weights.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "checkpoint/float_tensors.hpp"
#include "hub/hf_config.hpp"
#include "hub/hf_names.hpp"

namespace tandem::host::hub {
namespace {

namespace fs = std::filesystem;
using checkpoint::Checkpoint;
using checkpoint::TensorRecord;

// The Tandem tensors of one Hugging Face tensor under `rule`.
Result<std::vector<TensorRecord>> convert(TensorRecord& t, const std::string& name, const NameRule& rule,
                                          const std::string& file) {
  const std::string target = std::regex_replace(name, rule.hf, rule.tandem_from);
  if (rule.layout == Layout::same && (t.dtype == TDM_F32 || t.dtype == TDM_BF16 || t.dtype == TDM_F16)) {
    // As stored: a bf16 or f16 weight is widened as it is written to its
    // parameter (restore_tensors), or kept so by a narrow LoRA base.
    t.name = target;
    return std::vector<TensorRecord>{std::move(t)};
  }
  if (rule.layout == Layout::skipped) return std::vector<TensorRecord>{};
  auto values = checkpoint::as_f32(t, file);
  if (!values) return values.error();
  const auto& s = t.shape;
  const bool matrix = s.size() == 2, vector = s.size() == 1;
  auto bad_shape = [&](const char* want) {
    return make_error(file + ": tensor '" + t.name + "' should be " + want + " in this family",
                      TDM_INVALID_ARGUMENT);
  };
  switch (rule.layout) {
    case Layout::same:
      return std::vector<TensorRecord>{f32_record(target, s, *values)};
    case Layout::transposed:
      if (!matrix) return bad_shape("a matrix");
      return std::vector<TensorRecord>{
          f32_record(target, {s[1], s[0]}, transposed_columns(values->data(), s[0], s[1], 0, s[1]))};
    case Layout::packed_qkv: {  // a Conv1D's columns [in, 3·each], or a bias [3·each]
      if (!(matrix || vector) || s.back() % 3) return bad_shape("q, k and v packed in three equal parts");
      std::vector<TensorRecord> parts;
      const int64_t each = s.back() / 3;
      for (int p = 0; p < 3; ++p) {
        std::string part = target;
        part.replace(part.find('%'), 1, std::string(1, "qkv"[p]));
        if (vector)
          parts.push_back(
              f32_record(part, {each},
                         std::vector<float>(values->begin() + p * each, values->begin() + (p + 1) * each)));
        else
          parts.push_back(
              f32_record(part, {each, s[0]}, transposed_columns(values->data(), s[0], s[1], p * each, each)));
      }
      return parts;
    }
    case Layout::skipped:
      break;
  }
  return std::vector<TensorRecord>{};
}

// The safetensors files of the directory: the shards its index lists, or the one file.
Result<std::vector<std::string>> weight_files(const std::string& dir) {
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream in(index);
    std::stringstream text;
    text << in.rdbuf();
    auto j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
      return make_error(index.string() + ": has no \"weight_map\" object (damaged? download it again)",
                        TDM_INVALID_ARGUMENT);
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : j["weight_map"].items()) {
      if (!shard.is_string() || shard.get<std::string>().find('/') != std::string::npos)
        return make_error(index.string() + ": tensor '" + tensor + "' maps to " + shard.dump() +
                              ", not a file name in the directory",
                          TDM_INVALID_ARGUMENT);
      shards.insert(shard.get<std::string>());
    }
    std::vector<std::string> files;
    for (const auto& s : shards) files.push_back((fs::path(dir) / s).string());
    return files;
  }
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(single)) return std::vector<std::string>{single.string()};
  const bool pickle = fs::exists(fs::path(dir) / "pytorch_model.bin");
  return make_error(
      dir + ": has no model.safetensors" +
          (pickle ? std::string(", only pytorch_model.bin, a pickle Tandem does not execute: save the "
                                "model with safe_serialization=True (transformers' default)")
                  : std::string(" nor model.safetensors.index.json")),
      TDM_NOT_FOUND);
}

}  // namespace

Result<Checkpoint> read_hf_weights(const std::string& dir, const checkpoint::TensorFilter& keep) {
  auto config = read_hf_config(dir);
  if (!config) return config.error();
  auto files = weight_files(dir);
  if (!files) return files.error();
  const bool gpt2 = config->family == Family::gpt2;
  const std::string prefix = hf_prefix(config->family);
  Checkpoint out;
  out.metadata["tandem.source"] = dir;
  if (gpt2) out.metadata[std::string(kLeadingRowsKey) + "wpe.weight"] = "1";
  for (const std::string& file : *files) {
    auto read = checkpoint::read_safetensors(file, keep);
    if (!read) return read.error();
    for (TensorRecord& t : read->tensors) {
      const std::string name = t.name.rfind(prefix, 0) == 0 ? t.name.substr(prefix.size()) : t.name;
      const NameRule* rule = rule_for_hf(config->family, name);
      if (rule == nullptr)
        return make_error(file + ": tensor '" + t.name + "' belongs to no layer of a " + config->model_type +
                              " model in Tandem (a variant tandem import does not read?)",
                          TDM_UNSUPPORTED);
      if (config->tied && name == "lm_head.weight") continue;  // the head reads the token embedding
      auto converted = convert(t, name, *rule, file);
      if (!converted) return converted.error();
      std::vector<std::byte>().swap(t.data);  // converted (or moved): the shard shrinks as the weights grow
      for (TensorRecord& c : *converted) out.tensors.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace tandem::host::hub
