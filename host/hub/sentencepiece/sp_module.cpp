// libtandem_sentencepiece.so: libsentencepiece behind sp_module.h. Nothing
// thrown leaves it; a failure comes back as -1 or null with its reason.
#include "sp_module.h"

#include <sentencepiece_processor.h>

#include <cstring>
#include <string>
#include <vector>

struct tdm_sp {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

void put_error(const std::string& what, char* error, size_t size) {
  if (size == 0) return;
  const size_t n = std::min(what.size(), size - 1);
  std::memcpy(error, what.data(), n);
  error[n] = '\0';
}

}  // namespace

extern "C" {

tdm_sp* tdm_sp_load(const char* path, char* error, size_t error_size) {
  try {
    auto sp = std::make_unique<tdm_sp>();
    const auto status = sp->processor.Load(path);
    if (!status.ok()) {
      put_error(status.ToString(), error, error_size);
      return nullptr;
    }
    return sp.release();
  } catch (const std::exception& e) {
    put_error(e.what(), error, error_size);
    return nullptr;
  }
}

void tdm_sp_free(tdm_sp* sp) {
  delete sp;
}

int32_t tdm_sp_info(const tdm_sp* sp, int what) {
  switch (what) {
    case TDM_SP_SIZE:
      return sp->processor.GetPieceSize();
    case TDM_SP_BOS:
      return sp->processor.bos_id();
    case TDM_SP_EOS:
      return sp->processor.eos_id();
    case TDM_SP_UNK:
      return sp->processor.unk_id();
    default:
      return -1;
  }
}

int tdm_sp_is_control(const tdm_sp* sp, int32_t id) {
  return sp->processor.IsControl(id) ? 1 : 0;
}

size_t tdm_sp_piece(const tdm_sp* sp, int32_t id, char* out, size_t capacity) {
  try {
    const std::string& piece = sp->processor.IdToPiece(id);
    if (piece.size() <= capacity) std::memcpy(out, piece.data(), piece.size());
    return piece.size();
  } catch (...) {
    return 0;
  }
}

int32_t tdm_sp_piece_to_id(const tdm_sp* sp, const char* piece, size_t size) {
  try {
    return sp->processor.PieceToId(std::string_view(piece, size));
  } catch (...) {
    return -1;
  }
}

int64_t tdm_sp_encode(const tdm_sp* sp, const char* text, size_t size, int32_t* ids, size_t capacity,
                      char* error, size_t error_size) {
  try {
    std::vector<int> out;
    const auto status = sp->processor.Encode(std::string_view(text, size), &out);
    if (!status.ok()) {
      put_error(status.ToString(), error, error_size);
      return -1;
    }
    for (size_t i = 0; i < out.size() && out.size() <= capacity; ++i) ids[i] = out[i];
    return int64_t(out.size());
  } catch (const std::exception& e) {
    put_error(e.what(), error, error_size);
    return -1;
  }
}

size_t tdm_sp_decode(const tdm_sp* sp, const int32_t* ids, size_t count, char* out, size_t capacity) {
  try {
    std::string text;
    if (!sp->processor.Decode(std::vector<int>(ids, ids + count), &text).ok()) return 0;
    if (text.size() <= capacity) std::memcpy(out, text.data(), text.size());
    return text.size();
  } catch (...) {
    return 0;
  }
}

}  // extern "C"
