#include "cli/model_option.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "cli/exit_codes.hpp"
#include "cli/feature_flag.hpp"
#include "model/model_parser.hpp"

namespace tandem::cli {

void add_feature_option(po::options_description& options) {
  options.add_options()("feature", po::value<std::vector<std::string>>()->composing(),
                        "enable a feature plugin as [features.NAME] would: --feature amp, --feature "
                        "amp:dtype=f16,loss_scale=dynamic, --feature grad_accum:steps=4 (repeatable)")(
      "zero", po::value<int>(),
      "ZeRO stage over the data-parallel ranks: 1 shards the optimizer state, 2 the gradients too, 3 "
      "the parameters too (overrides [train] zero)");
}

std::optional<host::model::ModelSpec> read_model_option(const po::variables_map& vm, int& exit_code) {
  const std::string model_path = vm["model"].as<std::string>();
  auto overrides = vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (vm.count("zero")) overrides.push_back("train.zero=" + std::to_string(vm["zero"].as<int>()));
  std::vector<std::string> bare_features;
  std::map<std::string, std::string> flag_of;  // override -> the --feature flag that made it
  for (const std::string& text :
       vm.count("feature") ? vm["feature"].as<std::vector<std::string>>() : std::vector<std::string>{}) {
    auto flag = parse_feature_flag(text);
    if (!flag) {
      print_error(flag.error().message);
      exit_code = kExitUsage;
      return std::nullopt;
    }
    if (flag->overrides.empty()) bare_features.push_back(flag->name);
    overrides.insert(overrides.end(), flag->overrides.begin(), flag->overrides.end());
    for (const std::string& o : flag->overrides) flag_of[o] = text;
    if (flag->overrides.empty()) flag_of[empty_section_override(flag->name)] = text;
  }
  auto spec = host::model::parse_model_file(model_path, overrides);
  // A bare --feature NAME adds an empty section, but never replaces the
  // model file's own [features.NAME].
  bool missing = false;
  for (const std::string& name : bare_features)
    if (spec && !spec->has_feature(name)) {
      overrides.push_back(empty_section_override(name));
      missing = true;
    }
  if (missing) spec = host::model::parse_model_file(model_path, overrides);
  if (!spec) {
    print_error(spec.error().message);
    exit_code = kExitInput;
    return std::nullopt;
  }
  // A feature's settings from --feature are named as the user wrote them.
  for (auto& [name, origins] : spec->feature_origins)
    for (std::string& where : origins)
      if (auto it = flag_of.find(where.substr(std::min<size_t>(where.size(), 6)));
          where.rfind("--set ", 0) == 0 && it != flag_of.end())
        where = "--feature " + it->second;
  return std::move(*spec);
}

}  // namespace tandem::cli
