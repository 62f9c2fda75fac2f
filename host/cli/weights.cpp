#include "cli/weights.hpp"

#include <filesystem>

#include "train/checkpointing.hpp"

namespace tandem::cli {

host::Result<Weights> read_weights(const std::string& file_or_run_dir) {
  std::string path = file_or_run_dir;
  if (std::filesystem::is_directory(path)) {
    auto latest = host::train::latest_checkpoint(path);
    if (!latest)
      return host::make_error(path + ": no checkpoint in " + host::train::checkpoint_dir(path),
                              TDM_NOT_FOUND);
    path = *latest;
  }
  auto cp = host::checkpoint::read_safetensors(path);
  if (!cp) return cp.error();
  return Weights{path, std::move(*cp)};
}

}  // namespace tandem::cli
