// Command-line overrides of model-file keys: --set train.lr=0.1.
//
// KEY is a dotted path into the document; a layer is addressed by its name
// ("layers.fc1.out_features=128"). VALUE is read as a TOML value (numbers,
// true/false, [lists], "strings"); anything that is not valid TOML is taken
// as a bare string, so --set data.format=csv works without quotes.
#pragma once

#include <toml++/toml.h>

#include <map>
#include <string>
#include <vector>

#include "util/result.hpp"

namespace tandem::host::model {

// Applies every override; `origins` gets each node an override put in the
// document (a list's elements too) with the override's text, so an error
// about one names "--set KEY=VALUE" rather than a line of the file.
Result<void> apply_overrides(toml::table& doc, const std::vector<std::string>& overrides,
                             std::map<const toml::node*, std::string>& origins);

}  // namespace tandem::host::model
