// The model file of a command that trains or plans training (train, plan,
// bench): option "model" with the `--set` overrides and the `--feature`
// flags (feature_flag.hpp) applied, so each command reads a model and its
// features the same way.
#pragma once

#include <optional>

#include "cli/cli_common.hpp"
#include "model/model_spec.hpp"

namespace tandem::cli {

// Adds `--feature NAME[:KEY=VALUE,...]` (repeatable) and `--zero N` (the
// [train] zero stage) to a command's options.
void add_feature_option(po::options_description& options);

// The model file with --set, --zero and --feature applied; nullopt after printing
// why, with `exit_code` set (a malformed --feature is a usage error, a bad
// model file or override an input error).
std::optional<host::model::ModelSpec> read_model_option(const po::variables_map& vm, int& exit_code);

}  // namespace tandem::cli
