#include "quant/calibration_file.hpp"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
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

// `v` as an integer within [low, high] (high >= 0), or nothing. nlohmann
// would convert a float with a plain cast, undefined beyond the integer's
// range ("zero_point": 1e300), so only JSON integers count.
std::optional<int64_t> integer_in(const json& v, int64_t low, int64_t high) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return u <= uint64_t(high) ? std::optional<int64_t>(int64_t(u)) : std::nullopt;
  }
  if (!v.is_number_integer()) return std::nullopt;
  const int64_t i = v.get<int64_t>();
  return i >= low && i <= high ? std::optional<int64_t>(i) : std::nullopt;
}
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
    const json version = j.value("version", json(0));
    if (integer_in(version, 1, 1) != 1)
      return make_error(path + ": calibration file version " + version.dump() +
                            " is not supported (this tandem reads version 1)" + rerun,
                        TDM_INVALID_ARGUMENT);
    c.model = j.value("model", "");
    c.checkpoint = j.value("checkpoint", std::string(kInt8Checkpoint));
    c.calibrator = j.at("calibrator").get<std::string>();
    c.percentile = j.value("percentile", 0.0);
    const json samples = j.value("samples", json(0));
    const auto sample_count = integer_in(samples, 0, INT64_MAX);
    if (!sample_count)
      return make_error(path + ": samples " + samples.dump() + " is not a count" + rerun,
                        TDM_INVALID_ARGUMENT);
    c.samples = *sample_count;
    c.per_channel = j.value("per_channel", false);
    const json qmax = j.value("weight_qmax", json(127));  // files before it was recorded used 8 bits
    const auto weight_qmax = integer_in(qmax, 1, 127);
    c.weight_range = j.value("weight_range", "");
    if (!weight_qmax)
      return make_error(path + ": weight_qmax " + qmax.dump() + " is outside 1..127" + rerun,
                        TDM_INVALID_ARGUMENT);
    c.weight_qmax = int(*weight_qmax);
    for (const auto& [name, l] : j.at("layers").items()) {
      LayerCalibration lc;
      lc.op = l.value("op", "linear");
      const json& input = l.at("input");
      lc.input.scale = input.at("scale").get<double>();
      const auto zero_point = integer_in(input.at("zero_point"), 0, 255);
      lc.input.zero_point = zero_point.value_or(0);
      if (!(lc.input.scale > 0) || !std::isfinite(lc.input.scale) || !zero_point)
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
