// Parses a model file (TOML) into a ModelSpec.
//
// Every error names file:line:column, the section or layer, and the expected
// form. Unknown keys are errors. Overrides ("train.lr=0.1",
// "layers.fc1.out_features=128") are applied to the document before it is
// checked, so an override is validated exactly like the file.
#pragma once

#include <string>
#include <vector>

#include "model/model_spec.hpp"
#include "util/result.hpp"

namespace tandem::host::model {

Result<ModelSpec> parse_model_file(const std::string& path, const std::vector<std::string>& overrides = {});
Result<ModelSpec> parse_model_text(const std::string& text, const std::string& path,
                                   const std::vector<std::string>& overrides = {});

}  // namespace tandem::host::model
