// `tandem generate MODEL.toml --weights RUN --prompt TEXT`: continues a text
// with a trained byte-level language model (vocabulary 256: a token is a
// byte), one token per run of its decode program, with a cache of the keys
// and values before it (train/generator.hpp). The text goes to stdout as it
// is drawn; the speed to stderr. An INT8 model (`tandem quantize` output
// directory) generates with its INT8 linear layers.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <numeric>

#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"
#include "cli/weights.hpp"
#include "model/model_parser.hpp"
#include "program/device_select.hpp"
#include "train/generator.hpp"

namespace tandem::cli {
namespace {

po::options_description generate_options() {
  po::options_description options("Options");
  options.add_options()("model", po::value<std::string>(), "model file (TOML) of a language model")(
      "weights", po::value<std::string>(),
      "checkpoint (.safetensors), run directory, or `tandem quantize` output")(
      "prompt", po::value<std::string>()->default_value("\n", "\"\\n\""), "text to continue")(
      "tokens", po::value<int64_t>()->default_value(200), "tokens to generate")(
      "temperature", po::value<double>()->default_value(0.8, "0.8"),
      "sampling temperature; 0: the most likely token")("top-k", po::value<int64_t>()->default_value(0),
                                                        "sample among the k most likely tokens (0: all)")(
      "seed", po::value<uint64_t>()->default_value(0), "seed of the sampling (same seed, same text)")(
      "set", po::value<std::vector<std::string>>()->composing(), "override a model-file key (as for train)")(
      "device", po::value<std::string>()->default_value(""),
      "device: cuda:0, onednn:0, reference:0, cpu, gpu")("threads", po::value<int>()->default_value(0),
                                                         "compute threads for CPU backends");
  return options;
}

// The generation settings, or a usage error naming the option.
std::optional<std::string> check_settings(const po::variables_map& vm) {
  if (vm["tokens"].as<int64_t>() < 1) return "--tokens must be at least 1";
  const double t = vm["temperature"].as<double>();
  if (!(t >= 0) || !std::isfinite(t)) return "--temperature must be a finite number >= 0";
  if (vm["top-k"].as<int64_t>() < 0) return "--top-k must be 0 (all tokens) or more";
  if (vm["prompt"].as<std::string>().empty()) return "--prompt is empty: give at least one character";
  return std::nullopt;
}

int run_generate(const std::vector<std::string>& args, GlobalOptions globals) {
  po::options_description options = generate_options();
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map vm;
  if (auto stop = parse_command_options("generate", "MODEL.toml --weights RUN [--prompt TEXT]", args, options,
                                        positional, vm, globals))
    return *stop;
  if (!vm.count("model") || !vm.count("weights")) {
    print_error("generate needs a model file and --weights: tandem generate MODEL.toml --weights runs/NAME");
    return kExitUsage;
  }
  if (auto bad = check_settings(vm)) {
    print_error(*bad);
    return kExitUsage;
  }
  auto spec = parse_model_option(vm);
  if (!spec) {
    print_error(spec.error().message);
    return kExitInput;
  }
  if (spec->language_model() && spec->classes != 256) {
    print_error(spec->path + ": vocab_size = " + std::to_string(spec->classes) +
                ": generate reads and writes text for byte-level models (vocab_size = 256) only; this "
                "model's tokens need its own tokenizer");
    return kExitInput;
  }
  auto read = read_model_weights(vm["weights"].as<std::string>());
  if (!read) {
    print_error(read.error().message);
    return kExitInput;
  }
  std::unique_ptr<PluginSession> session = load_plugins(globals, threads_config(vm["threads"].as<int>()));
  auto device = host::program::select_device(*session->registry, vm["device"].as<std::string>());
  if (!device) {
    print_error(device.error().message);
    return kExitPlugin;
  }
  auto generator = host::train::Generator::create(*spec, *device, *session->registry, read->checkpoint,
                                                  read->path, read->int8 ? &*read->int8 : nullptr);
  if (!generator) {
    print_error(generator.error().message);
    return exit_code_or(generator.error(),
                        generator.error().status == TDM_INVALID_ARGUMENT ? kExitInput : kExitRuntimeFailure);
  }
  const std::string prompt = vm["prompt"].as<std::string>();
  std::vector<int32_t> ids;
  for (unsigned char c : prompt) ids.push_back(c);
  std::cout << prompt << std::flush;
  const host::train::SamplingOptions sampling{vm["temperature"].as<double>(), vm["top-k"].as<int64_t>(),
                                              vm["seed"].as<uint64_t>()};
  auto done = (*generator)->generate(ids, vm["tokens"].as<int64_t>(), sampling, [](int32_t token) {
    std::cout << static_cast<char>(token) << std::flush;
  });
  std::cout << std::endl;
  if (!done) {
    print_error(done.error().message);
    return exit_code_or(done.error(), kExitRuntimeFailure);
  }
  const auto& seconds = (*generator)->token_seconds();
  const double total = std::accumulate(seconds.begin(), seconds.end(), 0.0);
  if (total > 0)
    std::cerr << "generated " << vm["tokens"].as<int64_t>() << " tokens on " << device->id()
              << (read->int8 ? " (int8)" : "") << ": " << std::fixed << std::setprecision(1)
              << double(seconds.size()) / total << " tokens/s" << std::endl;
  return kExitOk;
}

const bool registered =
    register_command({"generate", "Continue a text with a trained language model", run_generate});

}  // namespace
}  // namespace tandem::cli
