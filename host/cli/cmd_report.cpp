// `tandem report RUN_DIR [RUN_DIR...]`: pictures of training runs, as one
// self-contained HTML file (report/html_report.hpp) that needs no network
// and no script to show.
#include <filesystem>
#include <iostream>

#include "checkpoint/atomic_file.hpp"
#include "cli/cli_common.hpp"
#include "cli/exit_codes.hpp"
#include "report/html_report.hpp"
#include "report/run_metrics.hpp"

namespace tandem::cli {
namespace {

constexpr const char* kSynopsis =
    "RUN_DIR [RUN_DIR...] [--output report.html]\n\n"
    "Draws what training runs recorded in their metrics.jsonl into one HTML file, with no network, CDN or\n"
    "script needed to view it: training and evaluation loss, accuracy (and a language model's perplexity\n"
    "and bits per byte), learning rate, samples/s and data-wait share over steps, as SVG charts; the\n"
    "memory per device (planned and measured peak); and, for a run of several devices, where each layer\n"
    "ran and the copies between devices per step. Several run directories overlay on the same charts, one\n"
    "colour each, named in the legend. The files of the runs are only read.";

int run_report(const std::vector<std::string>& args, GlobalOptions globals) {
  po::options_description options("Options");
  options.add_options()("run-dir", po::value<std::vector<std::string>>(),
                        "run directories of `tandem train` (each holds metrics.jsonl)")(
      "output,o", po::value<std::string>(),
      "the HTML file to write (default: <first RUN_DIR>/report.html); written to a temporary file, synced "
      "and renamed, so a reader never sees half a report");
  po::positional_options_description positional;
  positional.add("run-dir", -1);
  po::variables_map vm;
  if (auto stop = parse_command_options("report", kSynopsis, args, options, positional, vm, globals))
    return *stop;
  if (!vm.count("run-dir")) {
    print_error(
        "report needs a run directory: tandem report RUN_DIR [RUN_DIR...] (see tandem report --help)");
    return kExitUsage;
  }
  const auto dirs = vm["run-dir"].as<std::vector<std::string>>();
  const std::string output = vm.count("output")
                                 ? vm["output"].as<std::string>()
                                 : (std::filesystem::path(dirs.front()) / "report.html").string();
  std::error_code ec;
  if (std::filesystem::is_directory(output, ec)) {
    print_error("--output " + output + ": is a directory; give a file name, e.g. " +
                (std::filesystem::path(output) / "report.html").string());
    return kExitUsage;
  }
  std::vector<host::report::RunMetrics> runs;
  for (const std::string& dir : dirs) {
    auto run = host::report::read_run(dir);
    if (!run) {
      print_error(run.error().message + " (no report was written)");
      return kExitInput;
    }
    runs.push_back(std::move(*run));
  }
  const std::string html = host::report::render_report(runs);
  if (auto r = host::checkpoint::write_file_atomically(output, {html}); !r) {
    print_error("cannot write the report: " + r.error().message + "; give a writable path with --output");
    return kExitInput;
  }
  std::cout << "wrote " << output << " (" << runs.size() << (runs.size() == 1 ? " run" : " runs") << ")\n";
  return kExitOk;
}

const bool registered = register_command(
    {"report", "Draw training runs (loss, accuracy, throughput, memory) into one self-contained HTML file",
     run_report});

}  // namespace
}  // namespace tandem::cli
