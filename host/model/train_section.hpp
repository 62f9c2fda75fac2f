// The [train] section of a model file: the optimizer, its schedule, the
// batch and run length, checkpoints, and how the run is parallel and placed,
// read into a TrainSpec with every value checked where it is written.
#pragma once

#include <toml++/toml.h>

#include "model/model_spec.hpp"
#include "model/section_reader.hpp"

namespace tandem::host::model {

void read_train(Reader& r, const toml::table& t, TrainSpec& s);

}  // namespace tandem::host::model
