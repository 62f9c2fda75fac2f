// Tokenizers of Hugging Face model directories on small hand-written
// tokenizer.json files: merges by rank, every byte through the byte-level
// alphabet, added tokens never split, pre-tokenizer cuts, round trips, bos
// and eos from the configuration files, and every refusal naming its file.
// A SentencePiece model is trained here by libsentencepiece. The ids
// against HF's own libraries on real text: tokenizers.sh.
#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "hub/bpe_tokenizer.hpp"
#include "hub/text_unicode.hpp"
#include "hub/tokenizer.hpp"
#include "temp_dir.hpp"

namespace tandem::host::hub {
namespace {

using json = nlohmann::json;

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A byte-level vocabulary: byte b is id b; `tokens` (in byte-level
// spelling) follow from 256.
json vocab_with(const std::vector<std::string>& tokens) {
  json v = json::object();
  for (int b = 0; b < 256; ++b) v[byte_char(static_cast<unsigned char>(b))] = b;
  for (size_t i = 0; i < tokens.size(); ++i) v[tokens[i]] = 256 + i;
  return v;
}

json byte_level(bool use_regex) {
  return {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

json tokenizer_json(const json& vocab, const json& merges, const json& pre = byte_level(false)) {
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"vocab", vocab},
            {"merges", merges}}}};
}

class Dir {
 public:
  std::string path() const { return dir_.file(""); }
  std::string file(const std::string& name) const { return dir_.file(name); }
  void put(const std::string& name, const json& j) const { write(dir_.file(name), j.dump()); }
  Result<std::unique_ptr<Tokenizer>> load(const json& j) const {
    put("tokenizer.json", j);
    return load_tokenizer(path());
  }

 private:
  test::TempDir dir_;
};

std::vector<int32_t> encode(const Tokenizer& t, const std::string& text) {
  auto ids = t.encode(text);
  EXPECT_TRUE(ids) << ids.error().message;
  return ids ? *ids : std::vector<int32_t>{};
}

std::vector<int32_t> bytes_of(const std::string& text) {
  return std::vector<int32_t>(reinterpret_cast<const unsigned char*>(text.data()),
                              reinterpret_cast<const unsigned char*>(text.data()) + text.size());
}

TEST(Tokenizer, MergesApplyByRankNotByPosition) {
  Dir dir;
  const json vocab = vocab_with({"ab", "bc", "abc"});  // 256, 257, 258
  // (b, c) ranks before (a, b): "abc" becomes a + bc, then abc.
  auto first = dir.load(tokenizer_json(vocab, {"b c", "a b", "a bc"}));
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(encode(**first, "abc"), (std::vector<int32_t>{258}));
  // (a, b) first: ab + c, which no merge joins. The list form of merges.
  const json pairs =
      json::array({json::array({"a", "b"}), json::array({"b", "c"}), json::array({"a", "bc"})});
  auto second = dir.load(tokenizer_json(vocab, pairs));
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(encode(**second, "abc"), (std::vector<int32_t>{256, 'c'}));
  EXPECT_EQ(encode(**second, "abcabc"), (std::vector<int32_t>{256, 'c', 256, 'c'}));
  EXPECT_EQ((*second)->decode(std::vector<int32_t>{256, 'c', 258}), "abcabc");
}

TEST(Tokenizer, EqualRanksMergeLeftmostFirstAndLongWordsStayFast) {
  Dir dir;
  auto t = dir.load(tokenizer_json(vocab_with({"aa", "aaaa"}), {"a a", "aa aa"}));
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(encode(**t, "aaa"), (std::vector<int32_t>{256, 'a'}));
  EXPECT_EQ(encode(**t, "aaaaa"), (std::vector<int32_t>{257, 'a'}));
  // 200000 characters in one pre-token: the heap merges them in O(n log n).
  const auto ids = encode(**t, std::string(200000, 'a'));
  EXPECT_EQ(ids, std::vector<int32_t>(50000, 257));
}

TEST(Tokenizer, EveryByteGoesThroughTheByteLevelAlphabet) {
  Dir dir;
  auto t = dir.load(tokenizer_json(vocab_with({}), json::array()));
  ASSERT_TRUE(t) << t.error().message;
  // Valid UTF-8 holds every byte but C0, C1 and F5..FF: ASCII, then
  // characters whose leads and continuations cover the rest.
  std::string text;
  for (char32_t c = 0; c < 0x80; ++c) utf8_append(text, c);
  for (char32_t c : {0x80, 0xBF, 0x7FF, 0x800, 0xFFF, 0x1000, 0xFFFD, 0x10000, 0x3FFFF, 0x40000, 0x10FFFF})
    utf8_append(text, c);
  for (char32_t lead = 0xC2; lead <= 0xDF; ++lead) utf8_append(text, (lead - 0xC0) << 6 | 0x3F);
  for (char32_t c = 0x80; c < 0xC0; ++c) utf8_append(text, 0x7C0 | (c & 0x3F));
  for (char32_t lead = 0xE1; lead <= 0xEF; ++lead) utf8_append(text, (lead - 0xE0) << 12 | 0x100);
  for (char32_t lead = 0xF1; lead <= 0xF3; ++lead) utf8_append(text, (lead - 0xF0) << 18 | 0x10000);
  EXPECT_EQ(encode(**t, text), bytes_of(text));
  EXPECT_EQ((*t)->decode(bytes_of(text)), text);
  std::vector<int32_t> all(256);
  for (int b = 0; b < 256; ++b) all[size_t(b)] = b;
  const std::string decoded = (*t)->decode(all);  // bytes no UTF-8 text holds come back too
  ASSERT_EQ(decoded.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(static_cast<unsigned char>(decoded[size_t(b)]), b);
  EXPECT_EQ(byte_char(' '), "\xC4\xA0");  // GPT-2's Ġ
  EXPECT_EQ(byte_char('\n'), "\xC4\x8A");
  EXPECT_EQ(byte_char('A'), "A");
}

TEST(Tokenizer, AddedTokensAreMatchedFirstAndNeverSplit) {
  Dir dir;
  json j = tokenizer_json(vocab_with({}), json::array(), byte_level(true));
  j["added_tokens"] = {{{"id", 300}, {"content", "<|endoftext|>"}, {"special", true}, {"normalized", false}},
                       {{"id", 301}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}},
                       {{"id", 302}, {"content", "<|end"}, {"special", true}, {"normalized", false}},
                       {{"id", 303}, {"content", "[R]"}, {"rstrip", true}, {"normalized", false}}};
  auto t = dir.load(j);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ((*t)->vocab_size(), 304);
  EXPECT_EQ(encode(**t, "a<|endoftext|>b"), (std::vector<int32_t>{'a', 300, 'b'}));
  EXPECT_EQ(encode(**t, "<|end|><|end|x"), (std::vector<int32_t>{301, 302, '|', 'x'}));  // the longest wins
  EXPECT_EQ(encode(**t, "x[R]  y"), (std::vector<int32_t>{'x', 303, 'y'}));  // rstrip takes the spaces
  EXPECT_EQ((*t)->decode(std::vector<int32_t>{'a', 300, 'b'}), "a<|endoftext|>b");
  ASSERT_EQ((*t)->special().added.size(), 4u);
  EXPECT_EQ((*t)->special().added[0].content, "<|endoftext|>");
  EXPECT_EQ((*t)->token_id("<|end|>"), 301);
}

TEST(Tokenizer, Gpt2PatternAndSplitCutWhereHfCuts) {
  std::vector<PreTokenizerStep> gpt2(1);
  gpt2[0].regex =
      *TextRegex::compile(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  std::vector<std::string> pieces;
  const WordSink collect = [&](std::string_view p) -> Result<void> {
    pieces.emplace_back(p);
    return {};
  };
  ASSERT_TRUE(pre_tokenize(gpt2, "He's  été 2024!\n", collect));
  EXPECT_EQ(pieces, (std::vector<std::string>{"He", "'s", "Ġ", "Ġ\xC3\x83\xC2\xA9t\xC3\x83\xC2\xA9", "Ġ2024",
                                              "!", "Ċ"}));
  // U+180E is no white space to Oniguruma, whatever PCRE2 thinks: HF's cuts.
  const std::string mvs = "\xE1\xA0\x8E";
  pieces.clear();
  ASSERT_TRUE(pre_tokenize(gpt2, "a" + mvs + "b  " + mvs + " c" + mvs + mvs + "\n d", collect));
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", to_byte_chars(mvs), "b", "Ġ", "Ġ" + to_byte_chars(mvs),
                                              "Ġc", to_byte_chars(mvs + mvs), "Ċ", "Ġd"}));
  std::vector<PreTokenizerStep> llama3(2);
  llama3[0].kind = PreTokenizerStep::Kind::split;
  llama3[0].regex = *TextRegex::compile(
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  pieces.clear();
  ASSERT_TRUE(pre_tokenize(llama3, "a" + mvs + "b  " + mvs + " c" + mvs + mvs + "\n d", collect));
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", to_byte_chars(mvs + "b"), "Ġ", to_byte_chars(" " + mvs),
                                              "Ġc", to_byte_chars(mvs + mvs + "\n"), "Ġd"}));
  // A Split keeping its matches apart from the text between them, then ByteLevel.
  std::vector<PreTokenizerStep> split(2);
  split[0].kind = PreTokenizerStep::Kind::split;
  split[0].regex = *TextRegex::compile(R"(\p{N}{1,3})");
  pieces.clear();
  ASSERT_TRUE(pre_tokenize(split, "a1234567b", collect));
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "123", "456", "7", "b"}));
  split[0].behavior = SplitBehavior::merged_with_previous;
  pieces.clear();
  ASSERT_TRUE(pre_tokenize(split, "a1234567b", collect));
  EXPECT_EQ(pieces, (std::vector<std::string>{"a123", "456", "7", "b"}));
  split[0].behavior = SplitBehavior::removed;
  pieces.clear();
  ASSERT_TRUE(pre_tokenize(split, "a1234567b", collect));
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "b"}));
  split[0].behavior = SplitBehavior::merged_with_next;
  pieces.clear();
  ASSERT_TRUE(pre_tokenize(split, "a1234567b", collect));
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "123", "456", "7b"}));
  split[0].behavior = SplitBehavior::contiguous;
  pieces.clear();
  ASSERT_TRUE(pre_tokenize(split, "a1234567b", collect));
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "1234567", "b"}));
  // An empty match cuts the text around it (Oniguruma's iteration, HF's).
  split[0].behavior = SplitBehavior::isolated;
  split[0].regex = *TextRegex::compile("x*");
  pieces.clear();
  ASSERT_TRUE(pre_tokenize(split, "abxxc", collect));
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "b", "xx", "c"}));
  split[0].behavior = SplitBehavior::merged_with_previous;
  pieces.clear();
  ASSERT_TRUE(pre_tokenize(split, "abxxc", collect));
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "bxx", "c"}));
  split[0].behavior = SplitBehavior::merged_with_next;
  pieces.clear();
  ASSERT_TRUE(pre_tokenize(split, "abxxc", collect));
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "b", "xxc"}));
}

TEST(Tokenizer, RoundTripsUnicodeAndNormalizesToNfc) {
  Dir dir;
  json j = tokenizer_json(vocab_with({"Ã©", "ĠÃ©"}), {"Ã ©", "Ġ Ã©"}, byte_level(true));
  auto plain = dir.load(j);
  ASSERT_TRUE(plain) << plain.error().message;
  const std::string text =
      "caf\xC3\xA9 \xCE\xB1\xCE\xB2 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD\t\r\n  x";
  EXPECT_EQ((*plain)->decode(encode(**plain, text)), text);
  EXPECT_EQ(encode(**plain, " \xC3\xA9"), (std::vector<int32_t>{257}));
  // e + COMBINING ACUTE: two characters, one after NFC.
  EXPECT_EQ(encode(**plain, " e\xCC\x81").size(), 4u);
  j["normalizer"] = {{"type", "NFC"}};
  auto nfc = dir.load(j);
  ASSERT_TRUE(nfc) << nfc.error().message;
  EXPECT_EQ(encode(**nfc, " e\xCC\x81"), (std::vector<int32_t>{257}));
}

TEST(Tokenizer, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  Dir dir;
  json j = tokenizer_json(vocab_with({"ab", "abc"}), {"a b"});
  j["model"]["ignore_merges"] = true;
  auto t = dir.load(j);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(encode(**t, "abc"), (std::vector<int32_t>{257}));  // no merge makes abc, the vocabulary has it
  EXPECT_EQ(encode(**t, "abd"), (std::vector<int32_t>{256, 'd'}));
}

TEST(Tokenizer, BosAndEosComeFromTheConfigurationFiles) {
  Dir dir;
  json j = tokenizer_json(vocab_with({}), json::array());
  j["added_tokens"] = {{{"id", 256}, {"content", "<s>"}, {"special", true}},
                       {{"id", 257}, {"content", "</s>"}, {"special", true}},
                       {{"id", 258}, {"content", "<eot>"}, {"special", true}}};
  dir.put("config.json", {{"bos_token_id", 1}, {"eos_token_id", 2}});
  auto from_config = dir.load(j);
  ASSERT_TRUE(from_config) << from_config.error().message;
  EXPECT_EQ((*from_config)->special().bos, 1);
  EXPECT_EQ((*from_config)->special().eos, (std::vector<int32_t>{2}));
  EXPECT_FALSE((*from_config)->special().add_bos);
  dir.put("tokenizer_config.json", {{"bos_token", "<s>"}, {"eos_token", {{"content", "</s>"}}}});
  dir.put("generation_config.json", {{"eos_token_id", {257, 258}}});
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {256}}, {"tokens", {"<s>"}}}}}}};
  auto t = dir.load(j);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ((*t)->special().bos, 256);
  EXPECT_TRUE((*t)->special().add_bos);
  EXPECT_EQ((*t)->special().eos, (std::vector<int32_t>{257, 258}));
}

// The refusal of `j` as DIR/tokenizer.json, which must name the file and `what`.
void expect_refusal(const Dir& dir, const json& j, const std::string& what) {
  auto t = dir.load(j);
  ASSERT_FALSE(t) << "accepted; expected a refusal naming " << what;
  EXPECT_NE(t.error().message.find(dir.file("tokenizer.json")), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find(what), std::string::npos) << t.error().message;
}

TEST(Tokenizer, RefusalsNameTheFileAndTheKey) {
  Dir dir;
  const json good = tokenizer_json(vocab_with({"ab"}), {"a b"});
  expect_refusal(dir, tokenizer_json(vocab_with({"ab"}), {"a c"}), "names \"ac\"");
  expect_refusal(dir, tokenizer_json(vocab_with({"ab"}), {"a b c"}), "model.merges[0]");
  expect_refusal(dir, tokenizer_json(vocab_with({"ab"}), json::array({json::array({"ab", "€"})})),
                 "names \"€\", which model.vocab lacks");
  json j = good;
  j["model"]["type"] = "Unigram";
  expect_refusal(dir, j, "a Unigram model");
  j = good;
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
  expect_refusal(dir, j, "Metaspace pre-tokenizer");
  expect_refusal(dir, j, "tokenizer.model");
  j = good;
  j["normalizer"] = {{"type", "NFKC"}};
  expect_refusal(dir, j, "normalizer NFKC");
  j = good;
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}}, byte_level(false)}}};
  expect_refusal(dir, j, "pre_tokenizer Digits");
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "(?<"}}}, {"behavior", "Isolated"}}, byte_level(false)}}};
  expect_refusal(dir, j, "does not compile");
  j = good;
  j["decoder"] = {{"type", "WordPiece"}};
  expect_refusal(dir, j, "decoder WordPiece");
  j = good;
  j["model"]["dropout"] = 0.1;
  expect_refusal(dir, j, "model.dropout");
  j = good;
  j["added_tokens"] = {{{"content", "<x>"}}};
  expect_refusal(dir, j, "added_tokens");
  j = good;
  j["model"]["vocab"]["zz"] = "seven";
  expect_refusal(dir, j, "model.vocab[\"zz\"]");
  write(dir.file("tokenizer.json"), "{\"model\": [1, 2");
  auto broken = load_tokenizer(dir.path());
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().message.find(dir.file("tokenizer.json") + ": is not valid JSON"),
            std::string::npos)
      << broken.error().message;
}

TEST(Tokenizer, RefusalsOfTheDirectoryAndItsConfigurationFiles) {
  Dir dir;
  auto none = load_tokenizer(dir.path());
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("neither tokenizer.json nor tokenizer.model"), std::string::npos);
  EXPECT_FALSE(load_tokenizer(dir.file("absent")));
  const json good = tokenizer_json(vocab_with({}), json::array());
  dir.put("config.json", {{"eos_token_id", 9999}});
  auto t = dir.load(good);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find(dir.file("config.json") + ": \"eos_token_id\" = 9999"), std::string::npos)
      << t.error().message;
  dir.put("config.json", json::object());
  dir.put("tokenizer_config.json", {{"eos_token", "<none>"}});
  t = dir.load(good);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find(dir.file("tokenizer_config.json") + ": \"eos_token\" = \"<none>\""),
            std::string::npos)
      << t.error().message;
  std::filesystem::remove(dir.file("tokenizer_config.json"));
  t = dir.load(good);
  ASSERT_TRUE(t) << t.error().message;
  auto latin1 = (*t)->encode("caf\xE9");
  ASSERT_FALSE(latin1);
  EXPECT_NE(latin1.error().message.find("not UTF-8 (byte 3"), std::string::npos) << latin1.error().message;
}

TEST(Tokenizer, SentencePieceModelsAreReadFromTokenizerModel) {
  Dir dir;
  std::string corpus;
  for (int i = 0; i < 200; ++i)
    corpus += "the quick brown fox " + std::to_string(i) + " jumps over the lazy dog; caf\xC3\xA9 " +
              std::string(i % 7, 'z') + "\n";
  write(dir.file("corpus.txt"), corpus);
  const auto trained = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + dir.file("corpus.txt") + " --model_prefix=" + dir.file("tokenizer") +
      " --vocab_size=300 --hard_vocab_limit=false --model_type=bpe --byte_fallback=true --minloglevel=2");
  ASSERT_TRUE(trained.ok()) << trained.ToString();
  // A tokenizer.json that is not byte-level gives way to tokenizer.model.
  json metaspace = tokenizer_json(vocab_with({}), json::array(), {{"type", "Metaspace"}});
  auto t = dir.load(metaspace);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_NE((*t)->description().find("SentencePiece"), std::string::npos);
  EXPECT_GT((*t)->vocab_size(), 256 + 3);  // the 256 byte pieces, unk, bos, eos and merges
  EXPECT_EQ((*t)->special().bos, 1);       // libsentencepiece's defaults: unk 0, bos 1, eos 2
  EXPECT_EQ((*t)->special().eos, (std::vector<int32_t>{2}));
  EXPECT_TRUE((*t)->special().add_bos);
  const std::string text = "the lazy fox \xE2\x82\xAC 42";  // the euro sign only through byte fallback
  auto ids = (*t)->encode(text);
  ASSERT_TRUE(ids) << ids.error().message;
  EXPECT_EQ((*t)->decode(*ids), text);
  write(dir.file("tokenizer.model"), "not a model");
  auto broken = load_tokenizer(dir.path());
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().message.find(dir.file("tokenizer.model")), std::string::npos);
}

}  // namespace
}  // namespace tandem::host::hub
