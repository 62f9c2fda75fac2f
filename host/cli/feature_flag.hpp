// `--feature NAME[:KEY=VALUE,...]`: enables any feature plugin from the
// command line, as if the model file had `[features.NAME]` with those keys
// (`--feature amp`, `--feature amp:dtype=f16,loss_scale=dynamic`,
// `--feature grad_accum:steps=4`). Generic on purpose: the CLI knows no
// feature by name; the keys become ordinary `--set features.NAME.KEY=VALUE`
// overrides, so they also count in the model hash a checkpoint records.
#pragma once

#include <string>
#include <vector>

#include "util/result.hpp"

namespace tandem::cli {

struct FeatureFlag {
  std::string name;
  std::vector<std::string> overrides;  // "features.NAME.KEY=VALUE"
};

host::Result<FeatureFlag> parse_feature_flag(const std::string& text);

// The override that creates an empty `[features.NAME]` section, for a flag
// without keys on a model file that lacks the section.
std::string empty_section_override(const std::string& name);

}  // namespace tandem::cli
