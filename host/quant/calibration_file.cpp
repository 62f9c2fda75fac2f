#include "quant/calibration_file.hpp"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/atomic_file.hpp"

namespace tandem::host::quant {

using nlohmann::json;

Result<void> write_calibration(const std::string& path, const Calibration& c) {
  json j;
  j["format"] = "tandem-int8-calibration";
  j["version"] = 1;
  j["model"] = c.model;
  j["checkpoint"] = c.checkpoint;
  j["calibrator"] = c.calibrator;
  if (c.calibrator == "percentile") j["percentile"] = c.percentile;
  j["samples"] = c.samples;
  j["per_channel"] = c.per_channel;
  j["weight_qmax"] = c.weight_qmax;
  if (!c.weight_range.empty()) j["weight_range"] = c.weight_range;
  json layers = json::object();
  for (const auto& [name, l] : c.layers) {
    json input = {{"dtype", "u8"},
                  {"scale", l.input.scale},
                  {"zero_point", l.input.zero_point},
                  {"observed", {l.observed.lo, l.observed.hi}},
                  {"clipped", {l.clipped.lo, l.clipped.hi}}};
    json weight = {{"dtype", "s8"}, {"axis", 0}, {"scales", l.weight_scales}, {"zero_point", 0}};
    layers[name] = {{"op", l.op}, {"input", input}, {"weight", weight}};
  }
  j["layers"] = layers;
  const std::string text = j.dump(2) + "\n";
  return checkpoint::write_file_atomically(path, {text});
}

namespace {
const char* const kRerun =
    "; rerun `tandem quantize MODEL.toml --weights CKPT --output DIR` to write it again";
}  // namespace

Result<Calibration> read_calibration(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return make_error(path +
                          ": cannot open the calibration file (an INT8 model needs the calibration.json that "
                          "`tandem quantize` writes beside its checkpoint)" +
                          kRerun,
                      TDM_INVALID_ARGUMENT);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_calibration(buffer.str(), path);
}

Result<Calibration> parse_calibration(const std::string& text, const std::string& path) {
  const std::string rerun = kRerun;
  Calibration c;
  try {
    const json j = json::parse(text);
    if (j.value("format", "") != "tandem-int8-calibration")
      return make_error(
          path + ": not a Tandem calibration file (\"format\" is not \"tandem-int8-calibration\")" + rerun,
          TDM_INVALID_ARGUMENT);
    if (j.value("version", 0) != 1)
      return make_error(path + ": calibration file version " + std::to_string(j.value("version", 0)) +
                            " is not supported (this tandem reads version 1)" + rerun,
                        TDM_INVALID_ARGUMENT);
    c.model = j.value("model", "");
    c.checkpoint = j.value("checkpoint", std::string(kInt8Checkpoint));
    c.calibrator = j.at("calibrator").get<std::string>();
    c.percentile = j.value("percentile", 0.0);
    c.samples = j.value("samples", int64_t(0));
    c.per_channel = j.value("per_channel", false);
    c.weight_qmax = j.value("weight_qmax", 127);  // files before it was recorded used 8 bits
    c.weight_range = j.value("weight_range", "");
    if (c.weight_qmax < 1 || c.weight_qmax > 127)
      return make_error(
          path + ": weight_qmax " + std::to_string(c.weight_qmax) + " is outside 1..127" + rerun,
          TDM_INVALID_ARGUMENT);
    for (const auto& [name, l] : j.at("layers").items()) {
      LayerCalibration lc;
      lc.op = l.value("op", "linear");
      const json& input = l.at("input");
      lc.input.scale = input.at("scale").get<double>();
      lc.input.zero_point = input.at("zero_point").get<int64_t>();
      if (!(lc.input.scale > 0) || !std::isfinite(lc.input.scale) || lc.input.zero_point < 0 ||
          lc.input.zero_point > 255)
        return make_error(path + ": layer '" + name +
                              "': input scale must be positive and finite and zero_point " + "within 0..255" +
                              rerun,
                          TDM_INVALID_ARGUMENT);
      const auto observed = input.value("observed", std::vector<double>{0, 0});
      const auto clipped = input.value("clipped", std::vector<double>{0, 0});
      if (observed.size() == 2) lc.observed = {observed[0], observed[1]};
      if (clipped.size() == 2) lc.clipped = {clipped[0], clipped[1]};
      lc.weight_scales = l.at("weight").at("scales").get<std::vector<float>>();
      c.layers[name] = std::move(lc);
    }
  } catch (const json::exception& e) {
    return make_error(path + ": malformed calibration file: " + e.what() + rerun, TDM_INVALID_ARGUMENT);
  }
  if (c.layers.empty()) return make_error(path + ": lists no quantized layer" + rerun, TDM_INVALID_ARGUMENT);
  return c;
}

}  // namespace tandem::host::quant
