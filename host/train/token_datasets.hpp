// A language model's data sets, from [data] format = "tokens".
#pragma once

#include "model/model_spec.hpp"
#include "train/datasets.hpp"
#include "util/result.hpp"

namespace tandem::host::train {

Result<RunData> load_token_data(const model::ModelSpec& spec);

}  // namespace tandem::host::train
