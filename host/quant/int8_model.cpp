#include "quant/int8_model.hpp"

#include <cstring>
#include <filesystem>

#include "quant/calibration_file.hpp"

namespace tandem::host::quant {
namespace fs = std::filesystem;

bool is_int8_checkpoint(const checkpoint::Checkpoint& cp) {
  const auto it = cp.metadata.find("tandem.quantized");
  return it != cp.metadata.end() && it->second == "int8";
}

Result<std::optional<std::string>> int8_checkpoint_in(const std::string& dir) {
  const fs::path calibration = fs::path(dir) / kCalibrationFile;
  if (!fs::exists(calibration)) return std::optional<std::string>();
  auto c = read_calibration(calibration.string());
  if (!c) return c.error();
  const fs::path checkpoint = fs::path(dir) / c->checkpoint;
  if (!fs::exists(checkpoint))
    return make_error(checkpoint.string() + ": missing: " + calibration.string() +
                          " describes it, but the INT8 checkpoint is not there; rerun `tandem quantize` "
                          "with --output " +
                          dir,
                      TDM_INVALID_ARGUMENT);
  return std::optional<std::string>(checkpoint.string());
}

Result<lowering::Int8Plan> load_int8_plan(const checkpoint::Checkpoint& cp,
                                          const std::string& checkpoint_path) {
  const auto name = cp.metadata.find("tandem.calibration");
  const std::string file = name != cp.metadata.end() ? name->second : kCalibrationFile;
  const std::string path = (fs::path(checkpoint_path).parent_path() / file).string();
  auto c = read_calibration(path);
  if (!c) return c.error();
  lowering::Int8Plan plan;
  for (const auto& [layer, lc] : c->layers) {
    const std::string scale_name = layer + ".weight_scale";
    const checkpoint::TensorRecord* t = cp.find(scale_name);
    if (t == nullptr || t->dtype != TDM_F32 || t->shape.size() != 1)
      return make_error(checkpoint_path + ": has no f32 tensor '" + scale_name + "' for layer '" + layer +
                            "' that " + path +
                            " lists; the two files do not belong together (rerun "
                            "`tandem quantize`)",
                        TDM_INVALID_ARGUMENT);
    std::vector<float> scales(size_t(t->shape[0]));
    std::memcpy(scales.data(), t->data.data(), scales.size() * sizeof(float));
    if (scales.size() != lc.weight_scales.size())
      return make_error(path + ": layer '" + layer + "' lists " + std::to_string(lc.weight_scales.size()) +
                            " weight scales but " + checkpoint_path + " has " +
                            std::to_string(scales.size()) +
                            "; the two files do not belong together (rerun `tandem quantize`)",
                        TDM_INVALID_ARGUMENT);
    lowering::Int8Layer q;
    q.x_scale = lc.input.scale;
    q.x_zero_point = lc.input.zero_point;
    q.w_scale.assign(scales.begin(), scales.end());
    plan[layer] = std::move(q);
  }
  return plan;
}

}  // namespace tandem::host::quant
