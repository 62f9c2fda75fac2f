// `tandem import DIR --output model.toml`: a Hugging Face model directory
// (GPT-2, Llama, Mistral, Qwen2) as a Tandem model file in Tandem's own
// layers (hub/hf_model_file.hpp). The weights stay where they are: `train
// --init-from DIR` and `--weights DIR` read them from the directory.
#include <iostream>

#include "checkpoint/atomic_file.hpp"
#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"
#include "hub/hf_model_file.hpp"
#include "model/model_parser.hpp"

namespace tandem::cli {
namespace {

po::options_description import_options() {
  po::options_description options("Options");
  options.add_options()("dir", po::value<std::string>(),
                        "Hugging Face model directory (config.json, model.safetensors or its index)")(
      "output", po::value<std::string>(), "model file to write (replaced atomically)")(
      "context", po::value<int64_t>()->default_value(0),
      "training window in tokens (0: the model's positions, at most 1024)")(
      "name", po::value<std::string>(), "[model] name (default: the directory's name)");
  return options;
}

int run_import(const std::vector<std::string>& args, GlobalOptions globals) {
  po::options_description options = import_options();
  po::positional_options_description positional;
  positional.add("dir", 1);
  po::variables_map vm;
  if (auto stop =
          parse_command_options("import", "DIR --output model.toml", args, options, positional, vm, globals))
    return *stop;
  if (!vm.count("dir") || !vm.count("output")) {
    print_error("import needs a model directory and --output: tandem import gpt2/ --output gpt2.toml");
    return kExitUsage;
  }
  if (vm["context"].as<int64_t>() < 0) {
    print_error("--context " + std::to_string(vm["context"].as<int64_t>()) + ": give 1 or more tokens, or 0");
    return kExitUsage;
  }
  const std::string dir = vm["dir"].as<std::string>(), output = vm["output"].as<std::string>();
  auto config = host::hub::read_hf_config(dir);
  if (!config) {
    print_error(config.error().message);
    return kExitInput;
  }
  host::hub::ImportOptions o{vm["context"].as<int64_t>(),
                             vm.count("name") ? vm["name"].as<std::string>() : ""};
  auto text = host::hub::hf_model_file(*config, o);
  if (!text) {
    print_error(text.error().message);
    return kExitInput;
  }
  // What is written must read back: a model file Tandem itself refuses is a bug here.
  auto spec = host::model::parse_model_text(*text, output);
  if (!spec) {
    print_error("the model file made of " + dir +
                " does not parse (a bug in tandem import): " + spec.error().message);
    return kExitRuntimeFailure;
  }
  if (auto w = host::checkpoint::write_file_atomically(output, {*text}); !w) {
    print_error(w.error().message);
    return kExitRuntimeFailure;
  }
  std::cout << "wrote " << output << ": " << config->model_type << ", " << config->layers
            << " blocks of width " << config->hidden << ", context " << spec->input_shape.at(0)
            << ", vocabulary " << config->vocab_size << "; its weights are read from " << dir
            << " (--init-from " << dir << ", --weights " << dir << ")" << std::endl;
  return kExitOk;
}

const bool registered = register_command(
    {"import", "Make a model file of a Hugging Face model directory (GPT-2, Llama, Mistral, Qwen2)",
     run_import});

}  // namespace
}  // namespace tandem::cli
