#include "cli/weights.hpp"

#include <filesystem>

#include "checkpoint/float_tensors.hpp"
#include "hub/hf_config.hpp"
#include "quant/int8_model.hpp"
#include "train/checkpointing.hpp"
#include "train/sharded_checkpoint.hpp"

namespace tandem::cli {

host::Result<Weights> read_weights(const std::string& file_or_run_dir, bool as_f32) {
  std::string path = file_or_run_dir;
  if (std::filesystem::is_directory(path) && !host::train::is_sharded_checkpoint(path) &&
      !host::hub::is_hf_model_dir(path)) {
    auto latest = host::train::latest_checkpoint(path);
    if (!latest)
      return host::make_error(path + ": no checkpoint in " + host::train::checkpoint_dir(path),
                              TDM_NOT_FOUND);
    path = *latest;
  }
  auto cp = host::train::read_checkpoint(path);
  if (!cp) return cp.error();
  if (as_f32)
    if (auto widened = host::checkpoint::widen_to_f32(*cp, path); !widened) return widened.error();
  return Weights{path, std::move(*cp)};
}

host::Result<ModelWeights> read_model_weights(const std::string& given, bool as_f32) {
  std::string file = given;
  if (std::filesystem::is_directory(file)) {
    auto int8 = host::quant::int8_checkpoint_in(file);
    if (!int8) return int8.error();
    if (*int8) file = **int8;
  }
  auto read = read_weights(file, as_f32);
  if (!read) return read.error();
  ModelWeights weights{std::move(*read), std::nullopt};
  if (host::quant::is_int8_checkpoint(weights.checkpoint)) {
    auto plan = host::quant::load_int8_plan(weights.checkpoint, weights.path);
    if (!plan) return plan.error();
    weights.int8 = std::move(*plan);
  }
  return weights;
}

}  // namespace tandem::cli
