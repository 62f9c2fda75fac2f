// The Tandem model file of a Hugging Face model (`tandem import`): the
// family's blocks in Tandem's own layers, named so that the directory's
// weights load under them (hf_weights.hpp), with a [train] section for
// fine-tuning and a [data] section that reads token ids.
#pragma once

#include <cstdint>
#include <string>

#include "hub/hf_config.hpp"
#include "util/result.hpp"

namespace tandem::host::hub {

struct ImportOptions {
  int64_t context = 0;  // the training window; 0: the model's positions, at most 1024
  std::string name;     // [model] name; "" : the directory's name
};

// The model file's text. Errors: a context the model cannot attend over
// (beyond its positions, or Mistral's sliding window).
Result<std::string> hf_model_file(const HfConfig& config, const ImportOptions& options);

}  // namespace tandem::host::hub
