// `tandem export MODEL.toml --weights RUN --format onnx|safetensors --output
// FILE`: a trained model for other tools — its evaluation graph as ONNX
// (export/onnx_export.hpp), its weights under PyTorch's names
// (export/torch_weights.hpp), or a Hugging Face model directory of a model
// `tandem import` made (export/hf_export.hpp).
#include <iostream>

#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"
#include "cli/weights.hpp"
#include "export/hf_export.hpp"
#include "export/lora_weights.hpp"
#include "export/onnx_export.hpp"
#include "export/torch_weights.hpp"
#include "model/model_parser.hpp"
#include "util/format.hpp"

namespace tandem::cli {
namespace {

po::options_description export_options() {
  po::options_description options("Options");
  options.add_options()("model", po::value<std::string>(), "model file (TOML)")(
      "weights", po::value<std::string>(),
      "checkpoint (.safetensors), run directory (its newest checkpoint) or `tandem quantize` directory")(
      "format", po::value<std::string>()->default_value("onnx"),
      "onnx: the evaluation graph (input \"input\", output \"logits\", batch dimension symbolic); "
      "safetensors: the weights under PyTorch's state_dict names; hf: a Hugging Face model directory "
      "(config, weights, tokenizer) of an imported model, LoRA adapters merged; peft: the LoRA adapters "
      "alone, as PEFT saves them")("output", po::value<std::string>(),
                                   "file (directory for hf) to write, replaced atomically")(
      "hf-config", po::value<std::string>(),
      "hf, peft: the Hugging Face directory the model was imported from (default: [model] hf_dir)")(
      "set", po::value<std::vector<std::string>>()->composing(), "override a model-file key (as for train)");
  return options;
}

int export_hub(const host::model::ModelSpec& spec, const ModelWeights& weights, const std::string& output,
               const po::variables_map& vm) {
  const std::string source = vm.count("hf-config") ? vm["hf-config"].as<std::string>() : spec.hf_dir;
  if (source.empty()) {
    print_error(spec.path +
                ": has no [model] hf_dir (it was not made by tandem import): give the Hugging Face "
                "directory whose configuration it has with --hf-config DIR");
    return kExitUsage;
  }
  if (weights.int8) {
    print_error(weights.path +
                ": is an INT8 checkpoint; export --format hf writes f32 weights: give the "
                "checkpoint it was quantized from");
    return kExitInput;
  }
  if (vm["format"].as<std::string>() == "peft") {
    if (!spec.lora.enabled) {
      print_error(spec.path +
                  ": has no [features.lora]: --format peft writes LoRA adapters; --format hf the model");
      return kExitUsage;
    }
    auto written = host::exporting::export_peft(weights.checkpoint, weights.path, spec.lora, source, output);
    if (!written) {
      print_error(written.error().message);
      return written.error().status == TDM_UNSUPPORTED ? kExitInput : exit_code_for(written.error());
    }
    std::cout << "wrote " << output << ": adapter_model.safetensors (" << *written << " tensors of "
              << weights.path << ") and adapter_config.json, for PEFT over " << source << std::endl;
    return kExitOk;
  }
  host::checkpoint::Checkpoint merged;
  if (spec.lora.enabled) {  // the adapters folded into the weights they adapt
    auto m = host::exporting::merged_lora(weights.checkpoint, spec.lora, weights.path);
    if (!m) {
      print_error(m.error().message);
      return kExitInput;
    }
    merged = std::move(*m);
  }
  auto done = host::exporting::export_hf(spec.lora.enabled ? merged : weights.checkpoint, weights.path,
                                         source, output);
  if (!done) {
    print_error(done.error().message);
    return done.error().status == TDM_UNSUPPORTED ? kExitInput : exit_code_for(done.error());
  }
  std::string copied;
  for (const std::string& f : done->copied) copied += ", " + f;
  std::cout << "wrote " << output << ": model.safetensors (" << done->tensors << " tensors of "
            << weights.path << "), config.json" << copied << " from " << source << std::endl;
  return kExitOk;
}

int run_export(const std::vector<std::string>& args, GlobalOptions globals) {
  po::options_description options = export_options();
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map vm;
  if (auto stop = parse_command_options("export", "MODEL.toml --weights RUN --output FILE", args, options,
                                        positional, vm, globals))
    return *stop;
  const std::string format = vm["format"].as<std::string>();
  if (!vm.count("model") || !vm.count("weights") || !vm.count("output")) {
    print_error(
        "export needs a model file, --weights and --output: tandem export MODEL.toml --weights runs/NAME "
        "--output model.onnx");
    return kExitUsage;
  }
  if (format != "onnx" && format != "safetensors" && format != "hf" && format != "peft") {
    print_error("--format " + format + ": expected onnx, safetensors, hf or peft");
    return kExitUsage;
  }
  auto spec = parse_model_option(vm);
  if (!spec) {
    print_error(spec.error().message);
    return kExitInput;
  }
  // A Hugging Face directory's bf16 weights, a bf16 LoRA base: exports write f32.
  auto read = read_model_weights(vm["weights"].as<std::string>(), /*as_f32=*/true);
  if (!read) {
    print_error(read.error().message);
    return kExitInput;
  }
  const std::string output = vm["output"].as<std::string>();
  if (format == "hf" || format == "peft") return export_hub(*spec, *read, output, vm);
  if (format == "safetensors") {
    auto written = host::exporting::export_torch_weights(*spec, read->checkpoint, read->path, output);
    if (!written) {
      print_error(written.error().message);
      return exit_code_for(written.error());
    }
    std::cout << "wrote " << output << ": " << *written << " tensors of " << read->path
              << " under PyTorch's state_dict names" << std::endl;
    return kExitOk;
  }
  const std::optional<host::lowering::Int8Plan>& int8 = read->int8;
  auto summary =
      host::exporting::export_onnx(*spec, read->checkpoint, read->path, int8 ? &*int8 : nullptr, output);
  if (!summary) {
    print_error(summary.error().message);
    return summary.error().status == TDM_UNSUPPORTED ? kExitInput : exit_code_for(summary.error());
  }
  std::cout << "wrote " << output << " (" << host::human_bytes(summary->bytes) << "): ONNX opset 17, "
            << summary->nodes << " nodes, " << summary->initializers << " initializers"
            << (int8 ? ", INT8 layers as QuantizeLinear and MatMulInteger/ConvInteger" : "")
            << "; input \"input\", output "
            << "\"logits\"" << std::endl;
  return kExitOk;
}

const bool registered = register_command(
    {"export", "Write a trained model for other tools: ONNX, or safetensors under PyTorch's names",
     run_export});

}  // namespace
}  // namespace tandem::cli
