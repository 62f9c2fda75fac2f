// `tandem quantize MODEL.toml --weights CKPT --calib 512 --output DIR`:
// post-training INT8 quantization (host/quant/ptq.hpp). Writes
// DIR/calibration.json and DIR/model-int8.safetensors, which
// `tandem eval MODEL.toml --weights DIR` runs in INT8.
#include <filesystem>
#include <iostream>

#include "checkpoint/safetensors.hpp"
#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"
#include "cli/weights.hpp"
#include "model/model_parser.hpp"
#include "program/device_select.hpp"
#include "quant/ptq.hpp"
#include "train/checkpointing.hpp"
#include "train/datasets.hpp"

namespace tandem::cli {
namespace {

void print_quantized(const host::quant::PtqResult& r) {
  for (const auto& [layer, l] : r.calibration.layers)
    std::cout << layer << ": input [" << l.observed.lo << ", " << l.observed.hi << "] clipped to ["
              << l.clipped.lo << ", " << l.clipped.hi << "] scale " << l.input.scale << " zero point "
              << l.input.zero_point << ", " << l.weight_scales.size() << " weight scale(s)\n";
  std::cout << r.calibration.weight_range << "\n";
  std::cout << "calibrated " << r.calibration.samples << " samples with " << r.calibration.calibrator
            << ": wrote " << r.calibration_path << " and " << r.checkpoint_path << std::endl;
}

po::options_description quantize_options() {
  po::options_description options("Options");
  options.add_options()("model", po::value<std::string>(), "model file (TOML)")(
      "weights", po::value<std::string>(), "f32 checkpoint (.safetensors) or run directory (its newest)")(
      "calib", po::value<int64_t>()->default_value(512), "calibration samples (from the training set)")(
      "calibrator", po::value<std::string>()->default_value("minmax"),
      "activation calibrator: minmax, percentile or entropy")(
      "percentile", po::value<double>()->default_value(99.99, "99.99"),
      "kept share (%) for --calibrator percentile")(
      "per-channel", po::bool_switch(), "one weight scale per output channel (default: per tensor)")(
      "weight-bits", po::value<std::string>()->default_value("auto"),
      "s8 weight range: 8 (|w| <= 127), 7 (|w| <= 63) or auto: 7 where --device adds INT8 products "
      "pairwise in 16 bits (an x86 CPU without VNNI: its FEATURES in 'tandem devices'), else 8")(
      "output", po::value<std::string>(), "directory for calibration.json and model-int8.safetensors")(
      "set", po::value<std::vector<std::string>>()->composing(), "override a model-file key (as for train)")(
      "device", po::value<std::string>()->default_value(""), "device for the calibration runs")(
      "threads", po::value<int>()->default_value(0), "compute threads for CPU backends");
  return options;
}

int run_quantize(const std::vector<std::string>& args, GlobalOptions globals) {
  po::options_description options = quantize_options();
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map vm;
  if (auto stop = parse_command_options("quantize", "MODEL.toml --weights CKPT --output DIR", args, options,
                                        positional, vm, globals))
    return *stop;
  if (!vm.count("model") || !vm.count("weights") || !vm.count("output")) {
    print_error(
        "quantize needs a model file, --weights and --output: tandem quantize MODEL.toml --weights "
        "runs/NAME --calib 512 --output runs/NAME/int8");
    return kExitUsage;
  }
  auto method = host::quant::parse_method(vm["calibrator"].as<std::string>());
  if (!method) {
    print_error(method.error().message);
    return kExitUsage;
  }
  const double percentile = vm["percentile"].as<double>();
  if (!(percentile > 0 && percentile <= 100)) {
    print_error("--percentile must lie in (0, 100]");
    return kExitUsage;
  }
  const auto overrides =
      vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
  const std::string model_path = vm["model"].as<std::string>();
  auto spec = host::model::parse_model_file(model_path, overrides);
  if (!spec) {
    print_error(spec.error().message);
    return kExitInput;
  }
  auto weights = read_weights(vm["weights"].as<std::string>(), /*as_f32=*/true);
  if (!weights) {
    print_error(weights.error().message);
    return kExitInput;
  }
  auto data = host::train::load_run_data(*spec);
  if (!data) {
    print_error(data.error().message);
    return kExitInput;
  }
  std::unique_ptr<PluginSession> session = load_plugins(globals, threads_config(vm["threads"].as<int>()));
  auto device = host::program::select_device(*session->registry, vm["device"].as<std::string>());
  if (!device) {
    print_error(device.error().message);
    return kExitPlugin;
  }
  auto info = device->info();
  if (!info) {
    print_error(info.error().message);
    return kExitPlugin;
  }
  auto range = host::quant::parse_weight_bits(vm["weight-bits"].as<std::string>(), *info);
  if (!range) {
    print_error(range.error().message);
    return kExitUsage;
  }
  host::quant::PtqOptions o;
  o.method = *method;
  o.weight_range = *range;
  o.percentile = percentile;
  o.per_channel = vm["per-channel"].as<bool>();
  o.samples = vm["calib"].as<int64_t>();
  o.output_dir = vm["output"].as<std::string>();
  o.model_path = model_path;
  o.loader_threads = static_cast<int>(spec->data.threads);
  auto r = host::quant::quantize_model(*spec, *device, *session->registry, weights->checkpoint, weights->path,
                                       data->train, data->transforms, o);
  if (!r) {
    print_error(r.error().message);
    return exit_code_or(r.error(),
                        r.error().status == TDM_INVALID_ARGUMENT ? kExitInput : kExitRuntimeFailure);
  }
  print_quantized(*r);
  return kExitOk;
}

const bool registered =
    register_command({"quantize", "Post-training INT8 quantization of trained weights", run_quantize});

}  // namespace
}  // namespace tandem::cli
