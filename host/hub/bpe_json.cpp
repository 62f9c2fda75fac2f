// A byte-level BPE tokenizer.json read into a BpeTokenizer. Every stage's
// type is checked against what BpeTokenizer runs; anything else is refused
// naming the key and its type, because a stage left out would give other
// ids without a word of warning.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "hub/bpe_tokenizer.hpp"

namespace tandem::host::hub {
namespace {

using json = nlohmann::json;

// GPT-2's pre-tokenizer pattern, which ByteLevel applies when use_regex is
// true (tokenizers' byte_level.rs, and GPT-2's encoder.py before it).
const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string type_of(const json& j) {
  if (j.is_null()) return "null";
  if (!j.is_object()) return j.dump();
  return j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "(no type)";
}

// The steps of a pre-tokenizer: a Sequence's, or itself.
std::vector<json> steps_of(const json& pre) {
  if (type_of(pre) == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array())
    return pre["pretokenizers"].get<std::vector<json>>();
  if (pre.is_null()) return {};
  return {pre};
}

Error bad(const std::string& file, const std::string& what, tdm_status status = TDM_INVALID_ARGUMENT) {
  return make_error(file + ": " + what, status);
}

bool flag(const json& j, const char* key, bool fallback) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

Result<void> read_vocab(const json& model, BpeModel& m) {
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return bad(m.file, "model.vocab is missing or not an object of token: id (the file is damaged?)");
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      return bad(m.file, "model.vocab[" + json(token).dump() + "] = " + id.dump() + " is not a token id");
    const auto i = id.get<int32_t>();
    m.vocab[token] = i;
    if (size_t(i) >= m.tokens.size()) m.tokens.resize(size_t(i) + 1);
    m.tokens[size_t(i)] = token;
  }
  return {};
}

// model.merges: "left right" strings (older files) or [left, right] lists.
Result<void> read_merges(const json& model, BpeModel& m) {
  if (!model.contains("merges") || !model["merges"].is_array())
    return bad(m.file, "model.merges is missing or not a list (the file is damaged?)");
  const json& merges = model["merges"];
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& e = merges[i];
    std::string left, right;
    const std::string at = "model.merges[" + std::to_string(i) + "] = " + e.dump();
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        return bad(m.file, at + " is not two tokens separated by one space");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      left = e[0].get<std::string>();
      right = e[1].get<std::string>();
    } else {
      return bad(m.file, at + " is neither \"left right\" nor [\"left\", \"right\"]");
    }
    for (const std::string& t : {left, right, left + right})
      if (!m.vocab.count(t))
        return bad(m.file, at + " names " + json(t).dump() +
                               ", which model.vocab lacks (the file is damaged or was edited: get it again)");
    // A pair merged twice keeps its last rank, as HF's map of merges does.
    m.merges[BpeModel::pair(m.vocab[left], m.vocab[right])] = {int32_t(i), m.vocab[left + right]};
  }
  return {};
}

Result<void> read_model(const json& j, BpeTokenizer& t) {
  BpeModel& m = t.model;
  const json& model = j.at("model");  // present: not_byte_level_bpe checked it
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0))
    return bad(m.file,
               "model.dropout = " + model["dropout"].dump() +
                   ": BPE dropout samples other ids for training; set it to null to tokenize",
               TDM_UNSUPPORTED);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      return bad(m.file,
                 std::string("model.") + key + " = " + model[key].dump() +
                     ": byte-level BPE has no word-piece markers; Tandem reads none",
                 TDM_UNSUPPORTED);
  if (auto r = read_vocab(model, m); !r) return r;
  if (auto r = read_merges(model, m); !r) return r;
  m.fuse_unk = flag(model, "fuse_unk", false);
  m.byte_fallback = flag(model, "byte_fallback", false);
  m.ignore_merges = flag(model, "ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = m.vocab.find(model["unk_token"].get<std::string>());
    if (it == m.vocab.end())
      return bad(m.file, "model.unk_token = " + model["unk_token"].dump() + " is not in model.vocab");
    m.unk = it->second;
  }
  return {};
}

Result<void> read_added(const json& j, BpeTokenizer& t) {
  if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return {};
  if (!j["added_tokens"].is_array()) return bad(t.model.file, "added_tokens is not a list");
  for (const json& e : j["added_tokens"]) {
    if (!e.is_object() || !e.contains("id") || !e["id"].is_number_integer() || e["id"].get<int64_t>() < 0 ||
        !e.contains("content") || !e["content"].is_string() || e["content"].get<std::string>().empty())
      return bad(t.model.file, "added_tokens has " + e.dump() + ", not an object with an id and a content");
    AddedTokenRule r;
    r.token = {e["id"].get<int32_t>(), e["content"].get<std::string>(), flag(e, "special", false)};
    r.lstrip = flag(e, "lstrip", false);
    r.rstrip = flag(e, "rstrip", false);
    r.single_word = flag(e, "single_word", false);
    r.normalized = flag(e, "normalized", !r.token.special);
    if (t.added_contents.size() <= size_t(r.token.id)) t.added_contents.resize(size_t(r.token.id) + 1);
    t.added_contents[size_t(r.token.id)] = r.token.content;
    t.mutable_special().added.push_back(r.token);
    t.added.push_back(std::move(r));
  }
  return {};
}

Result<void> read_normalizer(const json& j, BpeTokenizer& t) {
  const json n = j.value("normalizer", json());
  std::vector<json> parts =
      type_of(n) == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()
          ? n["normalizers"].get<std::vector<json>>()
          : std::vector<json>{n};
  for (const json& p : parts) {
    if (p.is_null()) continue;
    if (type_of(p) != "NFC")
      return bad(t.model.file,
                 "normalizer " + type_of(p) +
                     " is not one Tandem applies (it applies NFC, or none); a byte-level BPE "
                     "tokenizer.json normally has null or NFC",
                 TDM_UNSUPPORTED);
    t.nfc = true;
  }
  return {};
}

Result<PreTokenizerStep> read_split(const json& s, const std::string& file) {
  PreTokenizerStep step;
  step.kind = PreTokenizerStep::Kind::split;
  const json& pattern = s.contains("pattern") ? s["pattern"] : json();
  std::string regex;
  if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
    regex = pattern["Regex"].get<std::string>();
  } else if (pattern.contains("String") && pattern["String"].is_string()) {
    for (char c : pattern["String"].get<std::string>()) {  // a literal: every ASCII punctuation escaped
      if (static_cast<unsigned char>(c) < 0x80 && !std::isalnum(static_cast<unsigned char>(c))) regex += '\\';
      regex += c;
    }
  } else {
    return bad(file, "pre_tokenizer Split has pattern " + pattern.dump() +
                         ", not {\"Regex\": ...} or {\"String\": ...}");
  }
  if (flag(s, "invert", false))
    return bad(file, "pre_tokenizer Split with invert = true is not supported", TDM_UNSUPPORTED);
  const std::string behavior =
      s.contains("behavior") && s["behavior"].is_string() ? s["behavior"].get<std::string>() : "";
  const std::pair<const char*, SplitBehavior> known[] = {
      {"Isolated", SplitBehavior::isolated},
      {"Removed", SplitBehavior::removed},
      {"MergedWithPrevious", SplitBehavior::merged_with_previous},
      {"MergedWithNext", SplitBehavior::merged_with_next},
      {"Contiguous", SplitBehavior::contiguous}};
  auto it = std::find_if(std::begin(known), std::end(known), [&](auto& k) { return behavior == k.first; });
  if (it == std::end(known))
    return bad(file, "pre_tokenizer Split has behavior " + json(behavior).dump() +
                         ", not Isolated, Removed, MergedWithPrevious, MergedWithNext or Contiguous");
  step.behavior = it->second;
  auto compiled = TextRegex::compile(regex);
  if (!compiled) return bad(file, "pre_tokenizer Split: " + compiled.error().message);
  step.regex = std::move(*compiled);
  return step;
}

Result<void> read_pre_tokenizer(const json& j, BpeTokenizer& t) {
  const json pre = j.value("pre_tokenizer", json());
  for (const json& s : steps_of(pre)) {
    const std::string type = type_of(s);
    if (type == "Split") {
      auto step = read_split(s, t.model.file);
      if (!step) return step.error();
      t.steps.push_back(std::move(*step));
    } else if (type == "ByteLevel") {
      PreTokenizerStep step;
      step.add_prefix_space = flag(s, "add_prefix_space", true);
      if (flag(s, "use_regex", true)) {
        auto gpt2 = TextRegex::compile(kGpt2Pattern);
        if (!gpt2) return bad(t.model.file, "GPT-2's pattern: " + gpt2.error().message, TDM_INTERNAL);
        step.regex = std::move(*gpt2);
      }
      t.steps.push_back(std::move(step));
    } else {
      return bad(t.model.file,
                 "pre_tokenizer " + type +
                     " is not one Tandem runs before byte-level BPE (it runs ByteLevel, and "
                     "Split before it as Llama 3 and Qwen2 have)",
                 TDM_UNSUPPORTED);
    }
  }
  if (std::count_if(t.steps.begin(), t.steps.end(),
                    [](auto& s) { return s.kind == PreTokenizerStep::Kind::byte_level; }) != 1 ||
      t.steps.back().kind != PreTokenizerStep::Kind::byte_level)
    return bad(t.model.file,
               "pre_tokenizer " + pre.dump() + ": Tandem reads one ByteLevel step, last (after any Split)",
               TDM_UNSUPPORTED);
  return {};
}

Result<void> read_decoder(const json& j, const std::string& file) {
  const json d = j.value("decoder", json());
  const bool sequence = type_of(d) == "Sequence" && d.contains("decoders") && d["decoders"].is_array();
  for (const json& s : sequence ? d["decoders"].get<std::vector<json>>() : std::vector<json>{d})
    if (!s.is_null() && type_of(s) != "ByteLevel")
      return bad(file, "decoder " + type_of(s) + " is not ByteLevel, the decoder of a byte-level BPE",
                 TDM_UNSUPPORTED);
  return {};
}

// A post-processor template that starts with a special token (Llama 3's
// <|begin_of_text|>) says a text given to the model begins with it.
void read_post_processor(const json& p, SpecialTokens& special) {
  if (type_of(p) == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
    for (const json& q : p["processors"]) read_post_processor(q, special);
    return;
  }
  if (type_of(p) != "TemplateProcessing" || !p.contains("single") || !p["single"].is_array() ||
      p["single"].empty() || !p["single"][0].contains("SpecialToken"))
    return;
  const json name = p["single"][0]["SpecialToken"].value("id", json());
  if (!name.is_string() || !p.contains("special_tokens") ||
      !p["special_tokens"].contains(name.get<std::string>()))
    return;
  const json ids = p["special_tokens"][name.get<std::string>()].value("ids", json());
  if (ids.is_array() && ids.size() == 1 && ids[0].is_number_integer()) {
    special.bos = ids[0].get<int32_t>();
    special.add_bos = true;
  }
}

}  // namespace

std::optional<std::string> not_byte_level_bpe(const json& j) {
  if (!j.contains("model") || !j["model"].is_object()) return "no \"model\" object";
  const json& model = j["model"];
  const std::string type = model.contains("type")     ? type_of(model)
                           : model.contains("merges") ? "BPE"
                                                      : "(untyped)";
  if (type != "BPE") return "a " + type + " model";
  const json pre = j.value("pre_tokenizer", json());
  std::string names;
  bool byte_level = false;
  for (const json& s : steps_of(pre)) {
    names += (names.empty() ? "" : ", ") + type_of(s);
    byte_level = byte_level || type_of(s) == "ByteLevel";
  }
  if (byte_level) return std::nullopt;
  if (type_of(pre) == "Sequence") names = "Sequence[" + names + "]";
  return "a BPE model with " + (names.empty() ? std::string("no pre-tokenizer") : names + " pre-tokenizer") +
         " (not byte-level: no ByteLevel pre-tokenizer)";
}

Result<std::unique_ptr<BpeTokenizer>> read_bpe_tokenizer(const json& j, const std::string& file) {
  auto t = std::make_unique<BpeTokenizer>();
  t->model.file = file;
  t->set_description("byte-level BPE (" + file + ")");
  for (auto read : {read_model, read_added, read_normalizer, read_pre_tokenizer})
    if (auto r = read(j, *t); !r) return r.error();
  if (auto r = read_decoder(j, file); !r) return r.error();
  if (j.contains("post_processor")) read_post_processor(j["post_processor"], t->mutable_special());
  return t;
}

}  // namespace tandem::host::hub
