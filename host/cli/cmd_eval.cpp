// `tandem eval MODEL.toml --weights CHECKPOINT`: loss and accuracy of trained
// weights on the model's test set (or another split). An INT8 checkpoint
// (`tandem quantize`: metadata tandem.quantized = int8) runs its linear and
// conv layers as quantize + linear_int8 / conv2d_int8.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "checkpoint/safetensors.hpp"
#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"
#include "cli/weights.hpp"
#include "model/model_parser.hpp"
#include "program/device_select.hpp"
#include "train/checkpointing.hpp"
#include "train/datasets.hpp"
#include "train/evaluator.hpp"

namespace tandem::cli {
namespace {

po::options_description eval_options() {
  po::options_description options("Options");
  options.add_options()("model", po::value<std::string>(), "model file (TOML)")(
      "weights", po::value<std::string>(),
      "checkpoint (.safetensors) or run directory (its newest checkpoint)")(
      "split", po::value<std::string>()->default_value("test"),
      "which data to evaluate: test, validation or train")(
      "set", po::value<std::vector<std::string>>()->composing(), "override a model-file key (as for train)")(
      "device", po::value<std::string>()->default_value(""),
      "device: cuda:0, onednn:0, reference:0, cpu, gpu")("threads", po::value<int>()->default_value(0),
                                                         "compute threads for CPU backends")(
      "repeat", po::value<int>()->default_value(1),
      "evaluate this many times; throughput from each batch's fastest run (benchmarks)")(
      "outputs", po::value<std::string>(),
      "also write a safetensors file with the tensors \"input\" (every sample as the model received it, "
      "after "
      "the [data] normalisation) and \"logits\" (what it computed), to compare with another runtime");
  return options;
}

// The seconds of all batches, each at its fastest over `repeat` passes. On
// a shared machine a pass is often slowed by a stall somewhere (an OpenMP
// thread descheduled at a barrier); the per-batch minimum discards those
// and also the first pass's kernel preparation.
host::Result<double> best_seconds(host::train::Evaluator& evaluator, const host::data::Dataset& set,
                                  const host::train::RunData& data, int threads,
                                  const host::train::EvalResult& first, int repeat) {
  std::vector<double> best = first.batch_seconds;
  for (int i = 1; i < repeat; ++i) {
    auto again = evaluator.evaluate(set, data.transforms, threads);
    if (!again) return again.error();
    for (size_t b = 0; b < best.size() && b < again->batch_seconds.size(); ++b)
      best[b] = std::min(best[b], again->batch_seconds[b]);
  }
  double total = 0;
  for (double t : best) total += t;
  return total;
}

// --outputs: "input" [N, ...] in the graph's input dtype, "logits" [N, ...]
// (a language model's [N·T, V] when its graph computes them per token).
host::Result<void> write_outputs(const std::string& path, const host::train::Evaluator::Outputs& o,
                                 const std::string& weights) {
  namespace ckpt = host::checkpoint;
  ckpt::Checkpoint file;
  file.metadata = {{"tandem.weights", weights}};
  std::vector<int64_t> input = {o.samples}, logits = {o.samples};
  input.insert(input.end(), o.input_dims.begin(), o.input_dims.end());
  int64_t per_sample = 1;
  for (int64_t d : o.logits_dims) per_sample *= d;
  if (int64_t(o.logits.size()) == o.samples * per_sample) {
    logits.insert(logits.end(), o.logits_dims.begin(), o.logits_dims.end());
  } else {
    const int64_t classes = o.logits_dims.empty() ? 1 : o.logits_dims.back();
    logits = {int64_t(o.logits.size()) / classes, classes};
  }
  file.tensors.push_back({"input", o.input_dtype, input, o.inputs});
  std::vector<std::byte> bytes(o.logits.size() * sizeof(float));
  std::memcpy(bytes.data(), o.logits.data(), bytes.size());
  file.tensors.push_back({"logits", TDM_F32, logits, std::move(bytes)});
  return ckpt::write_safetensors(path, file);
}

// `where`: the weights, the device and whether INT8; `seconds`: the graph
// runs' best time (0: not timed).
void print_evaluation(const host::model::ModelSpec& spec, const std::string& split,
                      const host::train::EvalResult& result, const std::string& where, double seconds,
                      int repeat) {
  std::cout << split << " samples " << result.samples << " loss " << result.loss << " accuracy "
            << result.accuracy;
  // As training's evaluation reports a language model (Progress::report_perplexity).
  if (spec.language_model()) std::cout << " perplexity " << std::exp(result.loss);
  if (spec.byte_level()) std::cout << " bits/byte " << result.loss / std::log(2.0);
  std::cout << " (" << where << ")" << std::endl;
  if (seconds > 0)
    std::cout << "throughput " << static_cast<int64_t>(static_cast<double>(result.samples) / seconds)
              << " samples/s (graph runs only, batch " << spec.train.batch_size << ", each batch's best of "
              << repeat << ")" << std::endl;
}

int run_eval(const std::vector<std::string>& args, GlobalOptions globals) {
  po::options_description options = eval_options();
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map vm;
  if (auto stop = parse_command_options("eval", "MODEL.toml --weights CHECKPOINT", args, options, positional,
                                        vm, globals))
    return *stop;
  if (!vm.count("model") || !vm.count("weights")) {
    print_error("eval needs a model file and --weights: tandem eval MODEL.toml --weights runs/NAME");
    return kExitUsage;
  }
  const std::string split = vm["split"].as<std::string>();
  if (split != "test" && split != "validation" && split != "train") {
    print_error("--split must be test, validation or train, got '" + split + "'");
    return kExitUsage;
  }
  auto spec = parse_model_option(vm);
  if (!spec) {
    print_error(spec.error().message);
    return kExitInput;
  }
  auto read = read_model_weights(vm["weights"].as<std::string>());
  if (!read) {
    print_error(read.error().message);
    return kExitInput;
  }
  const std::string& weights = read->path;
  const host::checkpoint::Checkpoint* cp = &read->checkpoint;
  auto data = host::train::load_run_data(*spec);
  if (!data) {
    print_error(data.error().message);
    return kExitInput;
  }
  const host::data::Dataset* set = split == "train"        ? &data->train
                                   : split == "validation" ? (data->validation ? &*data->validation : nullptr)
                                                           : (data->test ? &*data->test : nullptr);
  if (set == nullptr) {
    // A language model's file often holds out validation data only, so the
    // default --split test is not there: say which splits are.
    std::string held = "train";
    if (data->validation) held += ", validation";
    if (data->test) held += ", test";
    print_error(vm["model"].as<std::string>() + ": the model file has no '" + split + "' data; it has " +
                held + " (pick one with --split)");
    return kExitUsage;
  }
  std::unique_ptr<PluginSession> session = load_plugins(globals, threads_config(vm["threads"].as<int>()));
  auto device = host::program::select_device(*session->registry, vm["device"].as<std::string>());
  if (!device) {
    print_error(device.error().message);
    return kExitPlugin;
  }
  host::train::Evaluator evaluator(*spec, *device, *session->registry);
  const bool int8 = read->int8.has_value();
  if (int8) evaluator.use_int8(*read->int8);
  if (auto r = evaluator.load(*cp, weights); !r) {
    print_error(r.error().message);
    return exit_code_or(r.error(), kExitInput);
  }
  const int threads = static_cast<int>(spec->data.threads);
  host::train::Evaluator::Outputs outputs;
  if (vm.count("outputs")) evaluator.keep_outputs(&outputs);
  auto result = evaluator.evaluate(*set, data->transforms, threads);
  evaluator.keep_outputs(nullptr);  // --repeat's passes evaluate the same samples again
  auto seconds = result ? best_seconds(evaluator, *set, *data, threads, *result, vm["repeat"].as<int>())
                        : host::Result<double>(result.error());
  if (!seconds) {
    print_error(seconds.error().message);
    return exit_code_or(seconds.error(), kExitRuntimeFailure);
  }
  if (vm.count("outputs"))
    if (auto r = write_outputs(vm["outputs"].as<std::string>(), outputs, weights); !r) {
      print_error(r.error().message);
      return kExitRuntimeFailure;
    }
  print_evaluation(*spec, split, *result, weights + ", " + device->id() + (int8 ? ", int8" : ""), *seconds,
                   vm["repeat"].as<int>());
  return kExitOk;
}

const bool registered = register_command({"eval", "Evaluate trained weights on a data set", run_eval});

}  // namespace
}  // namespace tandem::cli
