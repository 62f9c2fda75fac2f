// `tandem generate MODEL.toml --weights RUN --prompt TEXT`: continues a text
// with a trained language model, one token per run of its decode program,
// with a cache of the keys and values before it (train/generator.hpp). The
// text goes to stdout as it is drawn; the speed to stderr. An INT8 model
// (`tandem quantize` output directory) generates with its INT8 linear
// layers.
//
// A byte-level model (vocabulary 256) reads and writes bytes. Any other
// vocabulary needs its tokenizer: `--tokenizer DIR`, by default the
// Hugging Face directory given as --weights when it has tokenizer files, or
// the one the model file was imported from ([model] hf_dir).
// The prompt is then encoded by it (with bos first where the tokenizer
// puts one), generation stops at its eos tokens, and the ids are decoded.
// `--prompt-ids` and `--print-ids` give and take ids instead of text.
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <sstream>

#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"
#include "cli/weights.hpp"
#include "hub/hf_config.hpp"
#include "hub/tokenizer.hpp"
#include "model/model_parser.hpp"
#include "program/device_select.hpp"
#include "train/generator.hpp"

namespace tandem::cli {
namespace {

using host::hub::Tokenizer;

po::options_description generate_options() {
  po::options_description options("Options");
  options.add_options()("model", po::value<std::string>(), "model file (TOML) of a language model")(
      "weights", po::value<std::string>(),
      "checkpoint (.safetensors), run directory, `tandem quantize` output, or Hugging Face model directory")(
      "prompt", po::value<std::string>()->default_value("\n", "\"\\n\""), "text to continue")(
      "prompt-ids", po::value<std::string>(), "token ids to continue, comma-separated (instead of --prompt)")(
      "tokenizer", po::value<std::string>(),
      "Hugging Face model directory of the tokenizer (default: --weights, when it is one with tokenizer "
      "files, else the model file's [model] hf_dir; none for a byte-level model)")(
      "print-ids", po::bool_switch(), "print the generated ids, comma-separated, instead of the text")(
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
  if (vm.count("prompt-ids") && !vm["prompt"].defaulted()) return "give --prompt or --prompt-ids, not both";
  if (vm["prompt"].as<std::string>().empty()) return "--prompt is empty: give at least one character";
  return std::nullopt;
}

// "1, 2,3" as ids, or why not.
host::Result<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || item.find_first_not_of(" \t", used) != std::string::npos || id < 0 || id > INT32_MAX)
      return host::make_error("--prompt-ids: \"" + item + "\" is not a token id (give ids like 1,2,3)",
                              TDM_INVALID_ARGUMENT);
    ids.push_back(int32_t(id));
  }
  if (ids.empty())
    return host::make_error("--prompt-ids is empty: give at least one id", TDM_INVALID_ARGUMENT);
  return ids;
}

// The tokenizer of --tokenizer, or of --weights when it is a Hugging Face
// directory with tokenizer files, or of the directory the model was
// imported from ([model] hf_dir, for a run that fine-tuned it); null for none.
host::Result<std::unique_ptr<Tokenizer>> find_tokenizer(const po::variables_map& vm,
                                                        const host::model::ModelSpec& spec) {
  std::string dir;
  auto tokenizer_in = [](const std::string& d) {
    return host::hub::is_hf_model_dir(d) && host::hub::has_tokenizer_files(d);
  };
  if (vm.count("tokenizer"))
    dir = vm["tokenizer"].as<std::string>();
  else if (tokenizer_in(vm["weights"].as<std::string>()))
    dir = vm["weights"].as<std::string>();
  else if (!spec.hf_dir.empty() && tokenizer_in(spec.hf_dir))
    dir = spec.hf_dir;
  if (dir.empty()) return std::unique_ptr<Tokenizer>();
  return host::hub::load_tokenizer(dir);
}

// The prompt's ids: --prompt-ids, the --prompt text encoded by the
// tokenizer (bos first where it puts one), or the text's bytes.
host::Result<std::vector<int32_t>> prompt_ids(const po::variables_map& vm, const Tokenizer* tokenizer) {
  if (vm.count("prompt-ids")) return parse_ids(vm["prompt-ids"].as<std::string>());
  const std::string prompt = vm["prompt"].as<std::string>();
  if (tokenizer == nullptr) {
    std::vector<int32_t> ids;
    for (unsigned char c : prompt) ids.push_back(c);
    return ids;
  }
  auto ids = tokenizer->encode(prompt);
  if (!ids) return host::make_error("--prompt: " + ids.error().message, ids.error().status);
  if (tokenizer->special().add_bos) ids->insert(ids->begin(), *tokenizer->special().bos);
  return ids;
}

// Writes the text of the tokens as they are drawn. The ids decoded are the
// prompt's and the new ones together, since a tokenizer may spell a token
// differently at the start of a text (SentencePiece drops the space of the
// first word); a trailing U+FFFD, SentencePiece's stand-in for a character
// whose bytes have not all come yet, waits for the next token.
class TextStream {
 public:
  TextStream(const Tokenizer& t, std::vector<int32_t> prompt)
      : tokenizer_(t), ids_(std::move(prompt)), printed_(t.decode(ids_).size()) {}
  void add(int32_t id) {
    ids_.push_back(id);
    print(true);
  }
  void finish() { print(false); }

 private:
  void print(bool hold_back) {
    const std::string text = tokenizer_.decode(ids_);
    size_t end = text.size();
    while (hold_back && end >= printed_ + 3 && text.compare(end - 3, 3, "\xEF\xBF\xBD") == 0) end -= 3;
    if (end > printed_) std::cout << text.substr(printed_, end - printed_) << std::flush;
    printed_ = std::max(printed_, end);
  }
  const Tokenizer& tokenizer_;
  std::vector<int32_t> ids_;
  size_t printed_;
};

struct Prepared {
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int32_t> prompt;
};

// The tokenizer and the prompt's ids, checked against the model's
// vocabulary; an error message and exit code otherwise.
std::optional<std::pair<std::string, int>> prepare(const po::variables_map& vm,
                                                   const host::model::ModelSpec& spec, Prepared& p) {
  auto tokenizer = find_tokenizer(vm, spec);
  if (!tokenizer) return std::pair{tokenizer.error().message, int(kExitInput)};
  p.tokenizer = std::move(*tokenizer);
  if (p.tokenizer && p.tokenizer->vocab_size() > spec.classes)
    return std::pair{p.tokenizer->description() + " has " + std::to_string(p.tokenizer->vocab_size()) +
                         " tokens, more than the model's vocab_size = " + std::to_string(spec.classes) +
                         " (" + spec.path + "): is it the tokenizer of another model?",
                     int(kExitInput)};
  if (!p.tokenizer && spec.classes != 256 && !(vm.count("prompt-ids") && vm["print-ids"].as<bool>()))
    return std::pair{
        spec.path + ": vocab_size = " + std::to_string(spec.classes) +
            ": text in and out needs the model's tokenizer: give --tokenizer DIR (a Hugging Face "
            "model directory with tokenizer.json or tokenizer.model), or ids with --prompt-ids "
            "and --print-ids",
        int(kExitInput)};
  auto ids = prompt_ids(vm, p.tokenizer.get());
  if (!ids) return std::pair{ids.error().message, int(vm.count("prompt-ids") ? kExitUsage : kExitInput)};
  p.prompt = std::move(*ids);
  return std::nullopt;
}

// Generates and writes the text (or the ids); the count of tokens drawn.
host::Result<size_t> write_generation(const po::variables_map& vm, host::train::Generator& generator,
                                      const Prepared& p) {
  host::train::SamplingOptions sampling{vm["temperature"].as<double>(), vm["top-k"].as<int64_t>(),
                                        vm["seed"].as<uint64_t>()};
  if (p.tokenizer) sampling.stop_tokens = p.tokenizer->special().eos;
  std::vector<int32_t> drawn;
  std::optional<TextStream> stream;
  const bool print_ids = vm["print-ids"].as<bool>();
  if (!print_ids && p.tokenizer) {
    std::cout << (vm.count("prompt-ids") ? p.tokenizer->decode(p.prompt) : vm["prompt"].as<std::string>())
              << std::flush;
    stream.emplace(*p.tokenizer, p.prompt);
  } else if (!print_ids) {
    std::cout << std::string(p.prompt.begin(), p.prompt.end()) << std::flush;
  }
  auto done = generator.generate(p.prompt, vm["tokens"].as<int64_t>(), sampling, [&](int32_t token) {
    drawn.push_back(token);
    const auto& stop = sampling.stop_tokens;
    if (print_ids || std::find(stop.begin(), stop.end(), token) != stop.end()) return;
    if (stream)
      stream->add(token);
    else
      std::cout << static_cast<char>(token) << std::flush;
  });
  if (stream) stream->finish();
  for (size_t i = 0; print_ids && i < drawn.size(); ++i) std::cout << (i ? "," : "") << drawn[i];
  std::cout << std::endl;
  if (!done) return done.error();
  return drawn.size();
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
  Prepared prepared;
  if (spec->language_model())
    if (auto failed = prepare(vm, *spec, prepared)) {
      print_error(failed->first);
      return failed->second;
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
  auto drawn = write_generation(vm, **generator, prepared);
  if (!drawn) {
    print_error(drawn.error().message);
    return exit_code_or(drawn.error(), kExitRuntimeFailure);
  }
  const auto& seconds = (*generator)->token_seconds();
  const double total = std::accumulate(seconds.begin(), seconds.end(), 0.0);
  if (total > 0)
    std::cerr << "generated " << *drawn << " tokens on " << device->id() << (read->int8 ? " (int8)" : "")
              << ": " << std::fixed << std::setprecision(1) << double(seconds.size()) / total << " tokens/s"
              << std::endl;
  return kExitOk;
}

const bool registered =
    register_command({"generate", "Continue a text with a trained language model", run_generate});

}  // namespace
}  // namespace tandem::cli
