// The data sets a run needs, loaded as its [data] section says.
#pragma once

#include <optional>

#include "data/dataset.hpp"
#include "data/transforms.hpp"
#include "model/model_spec.hpp"
#include "util/result.hpp"

namespace tandem::host::train {

struct RunData {
  data::Dataset train;
  std::optional<data::Dataset> validation;  // held out of train by validation_split
  std::optional<data::Dataset> test;
  data::Transforms transforms;
};

// Checks the samples' shape against [model] input and the labels against
// its classes, naming the file on a mismatch.
Result<RunData> load_run_data(const model::ModelSpec& spec);

}  // namespace tandem::host::train
