// Which tokenizer file of a model directory is read, and where its bos and
// eos come from. HF spreads them over four files: the tokenizer file
// (SentencePiece's own ids, tokenizer.json's post-processor template),
// tokenizer_config.json (token strings), generation_config.json (the ids
// transformers' generate stops at) and config.json. What the tokenizer
// file says comes first; generation_config.json's eos ids are added, since
// a chat model stops at each of them.
#include "hub/tokenizer.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hub/bpe_tokenizer.hpp"
#include "hub/sp_tokenizer.hpp"

namespace tandem::host::hub {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// The JSON object in `file`; null when the file is absent.
Result<json> read_json(const fs::path& file) {
  if (!is_file(file)) return json();
  std::ifstream in(file);
  if (!in) return make_error(file.string() + ": cannot read it (check its permissions)", TDM_NOT_FOUND);
  std::stringstream text;
  text << in.rdbuf();
  try {
    json j = json::parse(text.str());
    if (!j.is_object())
      return make_error(file.string() + ": is not a JSON object (damaged? get it again)",
                        TDM_INVALID_ARGUMENT);
    return j;
  } catch (const json::parse_error& e) {
    const std::string where = e.byte > text.str().size()
                                  ? "it ends too early, after " + std::to_string(text.str().size()) + " bytes"
                                  : "it goes wrong at byte " + std::to_string(e.byte);
    return make_error(file.string() + ": is not valid JSON (" + where + "); get it again",
                      TDM_INVALID_ARGUMENT);
  }
}

// `key` of a configuration file: a token id or a list of them ("eos_token_id": [1, 2]).
Result<std::vector<int32_t>> ids_of(const json& j, const char* key, const fs::path& file, int64_t vocab) {
  std::vector<int32_t> ids;
  if (!j.contains(key) || j[key].is_null()) return ids;
  const json& v = j[key];
  for (const json& e : v.is_array() ? v : json::array({v})) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= vocab)
      return make_error(file.string() + ": \"" + key + "\" = " + v.dump() +
                            " is not a token id of the tokenizer (0 to " + std::to_string(vocab - 1) +
                            ") or a list of them",
                        TDM_INVALID_ARGUMENT);
    ids.push_back(e.get<int32_t>());
  }
  return ids;
}

// tokenizer_config.json's "bos_token" / "eos_token": "<s>", or {"content": "<s>", ...}.
Result<std::optional<int32_t>> token_of(const json& j, const char* key, const fs::path& file,
                                        const Tokenizer& t) {
  if (!j.contains(key) || j[key].is_null()) return std::optional<int32_t>();
  const json& v = j[key];
  const json content = v.is_object() ? v.value("content", json()) : v;
  if (!content.is_string())
    return make_error(file.string() + ": \"" + key + "\" = " + v.dump() + " is not a token",
                      TDM_INVALID_ARGUMENT);
  auto id = t.token_id(content.get<std::string>());
  if (!id)
    return make_error(file.string() + ": \"" + key + "\" = " + content.dump() + " is not a token of " +
                          t.description() + " (a tokenizer_config.json of another model?)",
                      TDM_INVALID_ARGUMENT);
  return id;
}

Result<void> complete_special(const fs::path& dir, const Tokenizer& t, SpecialTokens& s) {
  json configs[3];
  const fs::path files[3] = {dir / "tokenizer_config.json", dir / "generation_config.json",
                             dir / "config.json"};
  for (int i = 0; i < 3; ++i) {
    auto j = read_json(files[i]);
    if (!j) return j.error();
    configs[i] = std::move(*j);
  }
  const json& tokenizer_config = configs[0];
  if (!s.bos) {
    auto bos = token_of(tokenizer_config, "bos_token", files[0], t);
    if (!bos) return bos.error();
    s.bos = *bos;
  }
  for (int i = 1; i < 3 && !s.bos; ++i) {
    auto ids = ids_of(configs[i], "bos_token_id", files[i], t.vocab_size());
    if (!ids) return ids.error();
    if (!ids->empty()) s.bos = ids->front();
  }
  if (s.eos.empty()) {
    auto eos = token_of(tokenizer_config, "eos_token", files[0], t);
    if (!eos) return eos.error();
    if (*eos) s.eos.push_back(**eos);
  }
  // generation_config.json, or config.json where there is none (as transformers does).
  const int source = configs[1].is_null() ? 2 : 1;
  auto ids = ids_of(configs[source], "eos_token_id", files[source], t.vocab_size());
  if (!ids) return ids.error();
  for (int32_t id : *ids)
    if (std::find(s.eos.begin(), s.eos.end(), id) == s.eos.end()) s.eos.push_back(id);
  if (tokenizer_config.contains("add_bos_token") && tokenizer_config["add_bos_token"].is_boolean())
    s.add_bos = tokenizer_config["add_bos_token"].get<bool>();
  s.add_bos = s.add_bos && s.bos.has_value();
  return {};
}

// tokenizer.json, byte-level BPE; nothing when it is of another kind and
// tokenizer.model can stand in for it.
Result<std::unique_ptr<Tokenizer>> read_tokenizer_json(const fs::path& file, bool have_model) {
  auto j = read_json(file);
  if (!j) return j.error();
  if (auto why = not_byte_level_bpe(*j)) {
    if (have_model) return std::unique_ptr<Tokenizer>();
    return make_error(file.string() + ": " + *why +
                          "; Tandem reads byte-level BPE from tokenizer.json (GPT-2, Llama 3, Qwen2) and "
                          "SentencePiece from tokenizer.model: put the model's tokenizer.model beside it",
                      TDM_UNSUPPORTED);
  }
  auto bpe = read_bpe_tokenizer(*j, file.string());
  if (!bpe) return bpe.error();
  return std::unique_ptr<Tokenizer>(std::move(*bpe));
}

}  // namespace

bool has_tokenizer_files(const std::string& dir) {
  return is_file(fs::path(dir) / "tokenizer.json") || is_file(fs::path(dir) / "tokenizer.model");
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return make_error(dir +
                          ": not a directory; give a Hugging Face model directory with tokenizer.json or "
                          "tokenizer.model",
                      TDM_NOT_FOUND);
  const fs::path json_file = fs::path(dir) / "tokenizer.json", model_file = fs::path(dir) / "tokenizer.model";
  const bool have_json = is_file(json_file), have_model = is_file(model_file);
  if (!have_json && !have_model)
    return make_error(dir +
                          ": has neither tokenizer.json nor tokenizer.model; download the model's tokenizer "
                          "files into it (e.g. huggingface-cli download MODEL tokenizer.json)",
                      TDM_NOT_FOUND);
  std::unique_ptr<Tokenizer> tokenizer;
  if (have_json) {
    auto read = read_tokenizer_json(json_file, have_model);
    if (!read) return read.error();
    tokenizer = std::move(*read);
  }
  if (!tokenizer) {
    auto read = read_sentencepiece(model_file.string());
    if (!read) return read.error();
    tokenizer = std::move(*read);
    tokenizer->special_.add_bos = tokenizer->special_.bos.has_value();  // LlamaTokenizer's default
  }
  if (auto r = complete_special(dir, *tokenizer, tokenizer->special_); !r) return r.error();
  return tokenizer;
}

}  // namespace tandem::host::hub
