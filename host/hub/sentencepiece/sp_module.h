/* The C interface of libtandem_sentencepiece.so, the module through which
 * Tandem runs libsentencepiece. Debian's libsentencepiece carries its own
 * copy of protobuf-lite, whose symbols clash with the libprotobuf that
 * `tandem export --format onnx` links: both in one program crash it while
 * it loads. So libsentencepiece is linked only into this module, which
 * sp_tokenizer.cpp loads on demand with RTLD_LOCAL | RTLD_DEEPBIND: the
 * module and its libraries resolve their symbols among themselves first.
 *
 * Sizes in and out are in bytes or ids; a call that fills a buffer returns
 * the size it needs, and fills it only when the capacity suffices. */
#ifndef TANDEM_HUB_SP_MODULE_H
#define TANDEM_HUB_SP_MODULE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_sp tdm_sp;

enum { TDM_SP_SIZE = 0, TDM_SP_BOS = 1, TDM_SP_EOS = 2, TDM_SP_UNK = 3 };

/* Null on failure, with the reason in `error` (NUL-terminated). */
tdm_sp* tdm_sp_load(const char* path, char* error, size_t error_size);
void tdm_sp_free(tdm_sp* sp);
/* TDM_SP_SIZE: the pieces; the others: the id, or -1 for none. */
int32_t tdm_sp_info(const tdm_sp* sp, int what);
int tdm_sp_is_control(const tdm_sp* sp, int32_t id);
size_t tdm_sp_piece(const tdm_sp* sp, int32_t id, char* out, size_t capacity);
int32_t tdm_sp_piece_to_id(const tdm_sp* sp, const char* piece, size_t size);
/* -1 on failure, with the reason in `error`. */
int64_t tdm_sp_encode(const tdm_sp* sp, const char* text, size_t size, int32_t* ids, size_t capacity,
                      char* error, size_t error_size);
size_t tdm_sp_decode(const tdm_sp* sp, const int32_t* ids, size_t count, char* out, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif
