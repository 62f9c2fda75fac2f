#include "options.hpp"

#include <cmath>
#include <set>

namespace amp {
namespace {

using tandem::Error;

Error bad(const std::string& key, const std::string& value, const std::string& expected) {
  return Error(TDM_INVALID_ARGUMENT, "[features.amp] " + key + " = '" + value + "': expected " + expected);
}

double number(const std::string& key, const std::string& text, const std::string& expected) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(v)) throw bad(key, text, expected);
  return v;
}

}  // namespace

const char* dtype_name(tdm_dtype dtype) {
  return dtype == TDM_F16 ? "f16" : dtype == TDM_BF16 ? "bf16" : "f32";
}

Options parse_options(const tandem::Config& config) {
  static const std::set<std::string> known = {"dtype",     "loss_scale", "initial_scale",
                                              "growth",    "backoff",    "growth_interval",
                                              "min_scale", "hysteresis", "wide_products"};
  for (const auto& [key, value] : config.values())
    if (known.count(key) == 0 && key.rfind("tandem.", 0) != 0)  // "tandem.": facts from the host (ABI 1.3)
      throw Error(TDM_INVALID_ARGUMENT,
                  "[features.amp]: unknown key '" + key +
                      "' (expected: dtype, loss_scale, initial_scale, growth, backoff, growth_interval, "
                      "min_scale, hysteresis, wide_products)");
  Options o;
  const std::string dtype = config.get("dtype").value_or("bf16");
  if (dtype == "bf16")
    o.dtype = TDM_BF16;
  else if (dtype == "f16")
    o.dtype = TDM_F16;
  else
    throw bad("dtype", dtype, "\"bf16\" or \"f16\"");

  const std::string scale = config.get("loss_scale").value_or(o.dtype == TDM_F16 ? "dynamic" : "none");
  if (scale == "dynamic") {
    o.scaling = Scaling::Dynamic;
  } else if (scale == "none") {
    o.scaling = Scaling::None;
  } else {
    o.scaling = Scaling::Fixed;
    o.initial_scale = number("loss_scale", scale, "\"dynamic\", \"none\" or a positive number");
    if (o.initial_scale <= 0) throw bad("loss_scale", scale, "a positive number");
  }
  if (auto v = config.get("initial_scale")) {
    if (o.scaling == Scaling::Fixed)
      throw Error(TDM_INVALID_ARGUMENT,
                  "[features.amp] initial_scale applies to loss_scale = \"dynamic\"; a fixed loss_scale is "
                  "its own scale");
    o.initial_scale = number("initial_scale", *v, "a positive number");
    if (o.initial_scale <= 0) throw bad("initial_scale", *v, "a positive number");
  }
  if (auto v = config.get("growth")) o.growth = number("growth", *v, "a number > 1");
  if (o.growth <= 1) throw bad("growth", std::to_string(o.growth), "a number > 1");
  if (auto v = config.get("backoff")) o.backoff = number("backoff", *v, "a number in (0, 1)");
  if (o.backoff <= 0 || o.backoff >= 1) throw bad("backoff", std::to_string(o.backoff), "a number in (0, 1)");
  if (auto v = config.get("min_scale")) o.min_scale = number("min_scale", *v, "a positive number");
  if (o.min_scale <= 0) throw bad("min_scale", std::to_string(o.min_scale), "a positive number");
  if (auto v = config.get("growth_interval")) {
    const double d = number("growth_interval", *v, "a whole number of steps >= 1");
    if (d < 1 || d != std::floor(d)) throw bad("growth_interval", *v, "a whole number of steps >= 1");
    o.growth_interval = static_cast<int64_t>(d);
  }
  if (auto v = config.get("hysteresis")) {
    const double d = number("hysteresis", *v, "a whole number >= 1");
    if (d < 1 || d != std::floor(d)) throw bad("hysteresis", *v, "a whole number >= 1");
    o.hysteresis = static_cast<int64_t>(d);
  }
  const std::string wide = config.get("wide_products").value_or("true");
  if (wide != "true" && wide != "false") throw bad("wide_products", wide, "true or false");
  o.wide_products = wide == "true" && config.get("tandem.wide_products").value_or("0") == "1";
  if (o.scaling == Scaling::Dynamic && o.initial_scale < o.min_scale)
    throw Error(TDM_INVALID_ARGUMENT, "[features.amp] initial_scale is below min_scale");
  return o;
}

}  // namespace amp
