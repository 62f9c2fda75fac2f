// A SentencePiece model (tokenizer.model: Llama 2, Mistral), run by
// Debian's libsentencepiece, whose header stays in sp_tokenizer.cpp.
#pragma once

#include <memory>
#include <string>

#include "hub/tokenizer.hpp"

namespace tandem::host::hub {

// Its bos and eos are the model's own (none where the model has -1);
// errors name the file.
Result<std::unique_ptr<Tokenizer>> read_sentencepiece(const std::string& file);

}  // namespace tandem::host::hub
