// `tandem tokenize FILES... --tokenizer DIR --output train.bin`: text files
// as the token ids of a Hugging Face model's tokenizer (hub/tokenizer.hpp),
// in the file format `[data] format = "tokens"` reads: little-endian u16 or
// u32 ids, one after another (token_dtype in the model file). Each file is
// encoded whole, never in chunks: a pre-token may span a line break, so a
// cut anywhere could change the ids. The output is written atomically.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "checkpoint/atomic_file.hpp"
#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"
#include "hub/tokenizer.hpp"

namespace tandem::cli {
namespace {

po::options_description tokenize_options() {
  po::options_description options("Options");
  options.add_options()("files", po::value<std::vector<std::string>>()->composing(), "UTF-8 text files")(
      "tokenizer", po::value<std::string>(),
      "Hugging Face model directory with tokenizer.json (byte-level BPE) or tokenizer.model (SentencePiece)")(
      "output", po::value<std::string>(), "token file to write (replaced atomically)")(
      "dtype", po::value<std::string>()->default_value("", "u16 when the vocabulary fits, else u32"),
      "id type: u16 or u32 (the model file's [data] token_dtype)")(
      "eos-between-files", po::bool_switch(), "put the tokenizer's eos token between one file and the next");
  return options;
}

// The --dtype to write, or a usage error.
std::optional<std::string> pick_dtype(const std::string& given, int64_t vocab, std::string& dtype) {
  dtype = given.empty() ? (vocab <= 65536 ? "u16" : "u32") : given;
  if (dtype != "u16" && dtype != "u32") return "--dtype " + dtype + ": give u16 or u32";
  if (dtype == "u16" && vocab > 65536)
    return "--dtype u16: the vocabulary has " + std::to_string(vocab) +
           " tokens, more than u16's 65536 ids; use --dtype u32";
  return std::nullopt;
}

host::Result<std::string> read_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return host::make_error(path + ": is a directory; give the text files in it", TDM_INVALID_ARGUMENT);
  std::ifstream in(path, std::ios::binary);
  if (!in) return host::make_error(path + ": cannot read it (does it exist?)", TDM_NOT_FOUND);
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return host::make_error(path + ": reading it failed", TDM_INVALID_ARGUMENT);
  return text.str();
}

void append_ids(std::string& out, const std::vector<int32_t>& ids, bool u16) {
  for (int32_t id : ids) {
    const auto v = static_cast<uint32_t>(id);
    out += char(v & 0xFF);
    out += char((v >> 8) & 0xFF);
    if (u16) continue;
    out += char((v >> 16) & 0xFF);
    out += char((v >> 24) & 0xFF);
  }
}

// One line on a terminal's stderr, redrawn after each file.
void draw_progress(size_t done, size_t files, uint64_t bytes, uint64_t total, size_t tokens) {
  const int width = 30, filled = total ? int(width * double(bytes) / double(total)) : width;
  std::fprintf(stderr, "\r\033[K[%s%s] %3d%% %zu/%zu files, %zu tokens",
               std::string(size_t(filled), '#').c_str(), std::string(size_t(width - filled), '.').c_str(),
               total ? int(100 * bytes / total) : 100, done, files, tokens);
  std::fflush(stderr);
}

struct Settings {
  std::vector<std::string> files;
  std::string output, dtype;
  bool eos_between = false;
};

// Encodes every file into `out`; errors name the file.
host::Result<size_t> tokenize_files(const host::hub::Tokenizer& tokenizer, const Settings& s, uint64_t& bytes,
                                    std::string& out) {
  uint64_t total = 0;
  for (const std::string& f : s.files) {
    std::error_code ec;
    total += std::filesystem::file_size(f, ec);
  }
  const bool live = ::isatty(STDERR_FILENO) != 0;
  size_t tokens = 0;
  for (size_t i = 0; i < s.files.size(); ++i) {
    auto text = read_text(s.files[i]);
    if (!text) return text.error();
    auto ids = tokenizer.encode(*text);
    if (!ids) return host::make_error(s.files[i] + ": " + ids.error().message, ids.error().status);
    if (s.eos_between && i + 1 < s.files.size()) ids->push_back(tokenizer.special().eos.front());
    append_ids(out, *ids, s.dtype == "u16");
    tokens += ids->size();
    bytes += text->size();
    if (live) draw_progress(i + 1, s.files.size(), bytes, total, tokens);
  }
  if (live) std::fprintf(stderr, "\r\033[K");
  return tokens;
}

int run_tokenize(const std::vector<std::string>& args, GlobalOptions globals) {
  po::options_description options = tokenize_options();
  po::positional_options_description positional;
  positional.add("files", -1);
  po::variables_map vm;
  if (auto stop = parse_command_options("tokenize", "FILES... --tokenizer DIR --output train.bin", args,
                                        options, positional, vm, globals))
    return *stop;
  if (!vm.count("files") || !vm.count("tokenizer") || !vm.count("output")) {
    print_error(
        "tokenize needs text files, --tokenizer and --output: tandem tokenize book.txt --tokenizer "
        "gpt2/ --output train.bin");
    return kExitUsage;
  }
  Settings s{vm["files"].as<std::vector<std::string>>(), vm["output"].as<std::string>(), "",
             vm["eos-between-files"].as<bool>()};
  auto tokenizer = host::hub::load_tokenizer(vm["tokenizer"].as<std::string>());
  if (!tokenizer) {
    print_error(tokenizer.error().message);
    return kExitInput;
  }
  if (auto bad = pick_dtype(vm["dtype"].as<std::string>(), (*tokenizer)->vocab_size(), s.dtype)) {
    print_error(*bad);
    return kExitUsage;
  }
  if (s.eos_between && (*tokenizer)->special().eos.empty()) {
    print_error(
        "--eos-between-files: " + (*tokenizer)->description() +
        " has no eos token (nor does tokenizer_config.json, generation_config.json or config.json say one)");
    return kExitInput;
  }
  const auto start = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  std::string out;
  auto tokens = tokenize_files(**tokenizer, s, bytes, out);
  if (!tokens) {
    print_error(tokens.error().message);
    return kExitInput;
  }
  if (auto w = host::checkpoint::write_file_atomically(s.output, {out}); !w) {
    print_error(w.error().message);
    return kExitRuntimeFailure;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "wrote " << s.output << ": " << *tokens << " tokens (" << s.dtype << ") of " << s.files.size()
            << " files, " << bytes << " bytes, in " << std::fixed << std::setprecision(2) << seconds << " s ("
            << std::setprecision(0) << double(*tokens) / std::max(seconds, 1e-9) << " tokens/s); tokenizer "
            << (*tokenizer)->description() << ", vocabulary " << (*tokenizer)->vocab_size() << std::endl;
  return kExitOk;
}

const bool registered = register_command(
    {"tokenize", "Turn text files into token ids with a Hugging Face model's tokenizer", run_tokenize});

}  // namespace
}  // namespace tandem::cli
