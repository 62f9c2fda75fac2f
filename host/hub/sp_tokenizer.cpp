// SentencePiece through libtandem_sentencepiece.so (sentencepiece/
// sp_module.h says why libsentencepiece is not linked into tandem itself),
// loaded the first time a tokenizer.model is read.
#include "hub/sp_tokenizer.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>

#include "hub/sentencepiece/sp_module.h"
#include "hub/text_unicode.hpp"

namespace tandem::host::hub {
namespace {

namespace fs = std::filesystem;

// The module's entry points.
struct Module {
  decltype(&tdm_sp_load) load = nullptr;
  decltype(&tdm_sp_free) free = nullptr;
  decltype(&tdm_sp_info) info = nullptr;
  decltype(&tdm_sp_is_control) is_control = nullptr;
  decltype(&tdm_sp_piece) piece = nullptr;
  decltype(&tdm_sp_piece_to_id) piece_to_id = nullptr;
  decltype(&tdm_sp_encode) encode = nullptr;
  decltype(&tdm_sp_decode) decode = nullptr;
};

// Beside an installed tandem (moved or not), then in the build tree.
std::vector<std::string> module_candidates() {
  std::vector<std::string> paths;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) paths.push_back((exe.parent_path().parent_path() / TANDEM_SP_MODULE_RELATIVE).string());
  paths.push_back(TANDEM_SP_MODULE_INSTALLED);
  paths.push_back(TANDEM_SP_MODULE_BUILT);
  return paths;
}

Result<const Module*> module() {
  static std::mutex mutex;
  static std::optional<Module> loaded;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded) return &*loaded;
  if (!failure.empty()) return make_error(failure, TDM_UNAVAILABLE);
  std::string tried;
  for (const std::string& path : module_candidates()) {
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      tried += "\n  " + path + ": " + ::dlerror();
      continue;
    }
    Module m;
    auto find = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::decay_t<decltype(fn)>>(::dlsym(handle, name));
    };
    find(m.load, "tdm_sp_load");
    find(m.free, "tdm_sp_free");
    find(m.info, "tdm_sp_info");
    find(m.is_control, "tdm_sp_is_control");
    find(m.piece, "tdm_sp_piece");
    find(m.piece_to_id, "tdm_sp_piece_to_id");
    find(m.encode, "tdm_sp_encode");
    find(m.decode, "tdm_sp_decode");
    if (m.load && m.free && m.info && m.is_control && m.piece && m.piece_to_id && m.encode && m.decode) {
      loaded = m;
      return &*loaded;
    }
    tried += "\n  " + path + ": lacks an entry point (a module of another Tandem version?)";
  }
  failure =
      "SentencePiece tokenizers (tokenizer.model) need Tandem's module libtandem_sentencepiece.so and "
      "libsentencepiece0; neither loaded (reinstall tandem, or apt-get install libsentencepiece0):" +
      tried;
  return make_error(failure, TDM_UNAVAILABLE);
}

class SentencePieceTokenizer : public Tokenizer {
 public:
  SentencePieceTokenizer(const Module& m, tdm_sp* sp, const std::string& file) : m_(m), sp_(sp), file_(file) {
    description_ = "SentencePiece (" + file + ")";
    if (m_.info(sp_, TDM_SP_BOS) >= 0) special_.bos = m_.info(sp_, TDM_SP_BOS);
    if (m_.info(sp_, TDM_SP_EOS) >= 0) special_.eos.push_back(m_.info(sp_, TDM_SP_EOS));
    // The control pieces (<s>, </s>); user-defined ones are matched in the
    // text by libsentencepiece itself, whose API does not list them.
    for (int32_t id = 0; id < m_.info(sp_, TDM_SP_SIZE); ++id)
      if (m_.is_control(sp_, id)) special_.added.push_back({id, piece(id), true});
  }
  ~SentencePieceTokenizer() override { m_.free(sp_); }
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  Result<std::vector<int32_t>> encode(std::string_view text) const override {
    if (auto bad = invalid_utf8_at(text))
      return make_error("the text is not UTF-8 (byte " + std::to_string(*bad) +
                            " does not start or continue a character); convert it first, e.g. with iconv "
                            "-f LATIN1 -t UTF-8",
                        TDM_INVALID_ARGUMENT);
    std::vector<int32_t> ids(text.size() + 8);
    char error[512] = "";
    int64_t n = m_.encode(sp_, text.data(), text.size(), ids.data(), ids.size(), error, sizeof error);
    if (n > int64_t(ids.size())) {
      ids.resize(size_t(n));
      n = m_.encode(sp_, text.data(), text.size(), ids.data(), ids.size(), error, sizeof error);
    }
    if (n < 0) return make_error(file_ + ": libsentencepiece failed to encode (" + error + ")", TDM_INTERNAL);
    ids.resize(size_t(n));
    return ids;
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::vector<int32_t> known;
    for (int32_t id : ids)
      if (id >= 0 && id < m_.info(sp_, TDM_SP_SIZE)) known.push_back(id);
    std::string text(known.size() * 8 + 16, '\0');
    size_t n = m_.decode(sp_, known.data(), known.size(), text.data(), text.size());
    if (n > text.size()) {
      text.resize(n);
      n = m_.decode(sp_, known.data(), known.size(), text.data(), text.size());
    }
    text.resize(n);
    return text;
  }

  int64_t vocab_size() const override { return m_.info(sp_, TDM_SP_SIZE); }

  std::optional<int32_t> token_id(const std::string& token) const override {
    const int32_t id = m_.piece_to_id(sp_, token.data(), token.size());
    // PieceToId answers the unknown piece's id for a piece it lacks.
    if (id < 0 || (id == m_.info(sp_, TDM_SP_UNK) && token != piece(id))) return std::nullopt;
    return id;
  }

 private:
  std::string piece(int32_t id) const {
    std::string p(64, '\0');
    size_t n = m_.piece(sp_, id, p.data(), p.size());
    if (n > p.size()) {
      p.resize(n);
      n = m_.piece(sp_, id, p.data(), p.size());
    }
    p.resize(n);
    return p;
  }

  const Module& m_;
  tdm_sp* sp_;
  std::string file_;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> read_sentencepiece(const std::string& file) {
  auto m = module();
  if (!m) return make_error(file + ": " + m.error().message, m.error().status);
  char error[512] = "";
  tdm_sp* sp = (*m)->load(file.c_str(), error, sizeof error);
  if (sp == nullptr)
    return make_error(file + ": not a SentencePiece model that libsentencepiece reads (" +
                          std::string(error) + "); get the file again",
                      TDM_INVALID_ARGUMENT);
  return std::unique_ptr<Tokenizer>(std::make_unique<SentencePieceTokenizer>(**m, sp, file));
}

}  // namespace tandem::host::hub
