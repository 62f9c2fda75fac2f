// Mistakes in checkpoints (--resume, --init-from, eval --weights), plugin
// files and command lines. A checkpoint is refused without being touched;
// a damaged plugin is named with what to do.
#include <filesystem>

#include "bad_input.hpp"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

// A trained checkpoint at {d}/ckpt.safetensors, changed by `damage`.
BadInput checkpoint(const std::string& name, const std::string& args, std::vector<std::string> says,
                    std::function<void(std::string&)> damage, int code = 0) {
  return {name, args, std::move(says), code, [damage](const std::string& dir) {
            const std::string file = dir + "/ckpt.safetensors";
            copy_trained_checkpoint(file);
            std::string bytes = read_file(file);
            if (damage) damage(bytes);
            write_file(file, bytes);
          }};
}

const char* const kResume = "train model.toml --device reference --resume ckpt.safetensors";
const char* const kInit = "train model.toml --device reference --run-dir run --init-from ckpt.safetensors";
const char* const kEval = "eval model.toml --device reference --weights ckpt.safetensors";

// The header's JSON with `from` replaced by `to`, its length field updated.
void edit_header(std::string& bytes, const std::string& from, const std::string& to) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  std::string header = bytes.substr(8, n);
  const size_t at = header.find(from);
  ASSERT_NE(at, std::string::npos) << "no '" << from << "' in the checkpoint's header";
  header.replace(at, from.size(), to);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes = out + header + bytes.substr(8 + n);
}

class RunInput : public BadInputTest {};

TEST_P(RunInput, IsRefusedClearly) {
  run_bad_input(GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, RunInput,
    ::testing::Values(
        checkpoint("resume_truncated", kResume, {"ckpt.safetensors"},
                   [](std::string& b) { b.resize(b.size() / 2); }),
        checkpoint("resume_empty", kResume, {"ckpt.safetensors"}, [](std::string& b) { b.clear(); }),
        checkpoint("resume_header_length_huge", kResume, {"ckpt.safetensors"},
                   [](std::string& b) { b[6] = '\x7f'; }),
        checkpoint("resume_header_not_json", kResume,
                   {"ckpt.safetensors", "not valid JSON at byte 8 of the file: '#'"},
                   [](std::string& b) { b[8] = '#'; }),
        checkpoint("resume_bit_flip_in_a_tensor", kResume, {"ckpt.safetensors"},
                   [](std::string& b) { b[b.size() - 5] ^= 0x10; }),
        checkpoint("resume_negative_step", kResume, {"ckpt.safetensors", "step"},
                   [](std::string& b) { edit_header(b, "\"tandem.step\":\"8\"", "\"tandem.step\":\"-7\""); }),
        checkpoint("resume_step_not_a_number", kResume, {"ckpt.safetensors", "step"},
                   [](std::string& b) {
                     edit_header(b, "\"tandem.step\":\"8\"", "\"tandem.step\":\"eight\"");
                   }),
        checkpoint("resume_another_model",
                   kResume + std::string(" --set layers.fc.out_features=8 --set model.classes=8"),
                   {"ckpt.safetensors"}, nullptr),
        checkpoint("resume_tensor_offsets_past_the_end", kResume, {"ckpt.safetensors"},
                   [](std::string& b) { b.resize(b.size() - 64); }),
        checkpoint("init_from_truncated", kInit, {"ckpt.safetensors"}, [](std::string& b) { b.resize(100); }),
        checkpoint("init_from_bit_flip", kInit, {"ckpt.safetensors"},
                   [](std::string& b) { b[b.size() - 9] ^= 1; }),
        checkpoint("eval_truncated", kEval, {"ckpt.safetensors"},
                   [](std::string& b) { b.resize(b.size() - 1); }),
        checkpoint("eval_bit_flip", kEval, {"ckpt.safetensors"},
                   [](std::string& b) { b[b.size() - 1] ^= 0x40; }),
        checkpoint("eval_another_model", kEval + std::string(" --set layers.conv1.out_channels=6"),
                   {"ckpt.safetensors"}, nullptr),
        checkpoint("eval_text_file", kEval, {"ckpt.safetensors"},
                   [](std::string& b) { b = "not a checkpoint\n"; }),
        BadInput{
            "resume_missing", "train model.toml --device reference --resume nosuch", {"nosuch"}, 0, nullptr},
        BadInput{"resume_directory_without_checkpoints",
                 "train model.toml --device reference --resume empty",
                 {"empty"},
                 0,
                 [](const std::string& dir) { fs::create_directory(dir + "/empty"); }},
        BadInput{"eval_weights_missing",
                 "eval model.toml --device reference --weights nosuch.safetensors",
                 {"nosuch.safetensors"},
                 0,
                 nullptr},
        BadInput{"checkpoint_a_directory",
                 kEval,
                 {"ckpt.safetensors"},
                 0,
                 [](const std::string& dir) { fs::create_directory(dir + "/ckpt.safetensors"); }},
        BadInput{"resume_and_init_from",
                 std::string(kResume) + " --init-from ckpt.safetensors",
                 {"--init-from"},
                 2,
                 [](const std::string& dir) { copy_trained_checkpoint(dir + "/ckpt.safetensors"); }},
        BadInput{"existing_run_directory",
                 "train model.toml --device reference --run-dir run",
                 {"run"},
                 2,
                 [](const std::string& dir) {
                   fs::create_directories(dir + "/run/checkpoints");
                   copy_trained_checkpoint(dir + "/run/checkpoints/step-000000008.safetensors");
                 }}),
    CaseName());

// A plugin directory holding `file` with `bytes`; the run asks for its device.
BadInput plugin(const std::string& name, const std::string& file, std::function<std::string()> bytes,
                std::vector<std::string> says, int code = 0) {
  return {
      name,
      "--plugin-path plugins train model.toml --run-dir run --device " + file.substr(10, file.size() - 13),
      std::move(says), code, [file, bytes](const std::string& dir) {
        fs::create_directory(dir + "/plugins");
        write_file(dir + "/plugins/" + file, bytes());
      }};
}

std::string built_reference() {
  return read_file(TANDEM_BUILD_PLUGIN_DIR "/libtandem-reference.so");
}

INSTANTIATE_TEST_SUITE_P(
    Plugins, RunInput,
    ::testing::Values(
        plugin("plugin_garbage", "libtandem-junk.so", [] { return std::string("garbage\n"); },
               {"libtandem-junk.so", "damaged or not a plugin", "junk"}),
        plugin("plugin_empty", "libtandem-void.so", [] { return std::string(); },
               {"libtandem-void.so", "void"}),
        plugin("plugin_cut_short", "libtandem-cut.so", [] { return built_reference().substr(0, 5000); },
               {"libtandem-cut.so", "cut short"}),
        plugin("plugin_cut_in_half", "libtandem-half.so",
               [] {
                 const std::string whole = built_reference();
                 return whole.substr(0, whole.size() / 2);
               },
               {"libtandem-half.so", "cut short"}),
        plugin("plugin_not_a_tandem_plugin", "libtandem-zlib.so",
               [] { return read_file("/usr/lib/x86_64-linux-gnu/libz.so.1"); },
               {"libtandem-zlib.so", "tdm_plugin_entry"}),
        plugin("plugin_a_script", "libtandem-script.so", [] { return std::string("#!/bin/sh\necho hi\n"); },
               {"libtandem-script.so"}),
        plugin("plugin_elf_of_32_bits", "libtandem-elf32.so",
               [] {
                 std::string elf = built_reference().substr(0, 4096);
                 elf[4] = 1;  // ELFCLASS32
                 return elf;
               },
               {"libtandem-elf32.so"}),
        BadInput{"device_unknown",
                 "train model.toml --run-dir run --device tpu",
                 {"tpu", "tandem devices"},
                 0,
                 nullptr},
        BadInput{"device_index_out_of_range",
                 "train model.toml --run-dir run --device reference:7",
                 {"reference:7"},
                 0,
                 nullptr},
        BadInput{"device_list_empty", "train model.toml --run-dir run --device ,", {"--device"}, 2, nullptr},
        BadInput{"plugin_directory_writable_by_all",
                 "--secure-plugins --plugin-path plugins train model.toml "
                 "--run-dir run --device lib",
                 {"plugins"},
                 0,
                 [](const std::string& dir) {
                   fs::create_directory(dir + "/plugins");
                   fs::copy_file(TANDEM_BUILD_PLUGIN_DIR "/libtandem-reference.so",
                                 dir + "/plugins/libtandem-lib.so");
                   fs::permissions(dir + "/plugins", fs::perms::all);
                 }}),
    CaseName());

BadInput cli(const std::string& name, const std::string& args, std::vector<std::string> says, int code = 2) {
  return {name, args, std::move(says), code, nullptr};
}

INSTANTIATE_TEST_SUITE_P(
    CommandLine, RunInput,
    ::testing::Values(
        cli("unknown_command", "frobnicate", {"frobnicate"}),
        cli("unknown_option", "train model.toml --lr 0.1", {"--lr"}),
        cli("no_model_file", "train", {"model"}),
        cli("threads_negative", "train model.toml --run-dir run --threads -1", {"--threads"}),
        cli("loader_threads_negative", "train model.toml --run-dir run --loader-threads -1",
            {"--loader-threads"}),
        cli("comm_timeout_negative", "train model.toml --run-dir run --comm-timeout -1", {"--comm-timeout"}),
        cli("threads_text", "train model.toml --run-dir run --threads many", {"--threads"}),
        cli("threads_past_the_cores", "train model.toml --run-dir run --threads 100000",
            {"--threads 100000: this machine has ", " cores"}),
        cli("run_dir_empty", "train model.toml --run-dir ''", {"--run-dir '': an empty path"}),
        cli("plugin_path_missing", "--plugin-path nodir devices", {"--plugin-path nodir: no such directory"}),
        cli("plugin_path_a_file", "--plugin-path model.toml devices",
            {"--plugin-path model.toml: not a directory"}),
        cli("memory_budget_unparsable", "train model.toml --run-dir run --memory-budget reference:0=lots",
            {"--memory-budget", "lots"}),
        cli("memory_budget_impossible",
            "train model.toml --run-dir run --device reference --memory-budget reference:0=1KiB",
            {"reference:0", "1.0 KiB"}, 0),
        cli("memory_budget_unknown_device",
            "train model.toml --run-dir run --device reference --memory-budget tpu:0=1GiB", {"tpu:0"}, 0),
        cli("placement_unknown", "train model.toml --run-dir run --placement random", {"random"}, 0),
        cli("feature_malformed", "train model.toml --run-dir run --feature amp:dtype", {"amp:dtype"}, 0),
        cli("feature_unknown", "train model.toml --run-dir run --device reference --feature turbo",
            {"--feature turbo: [features.turbo] needs a feature plugin named 'turbo'"}, 0),
        cli("feature_bad_value",
            "train model.toml --run-dir run --device reference --feature grad_accum:steps=0",
            {"check --feature grad_accum:steps=0", "steps"}, 0),
        cli("feature_unknown_key", "train model.toml --run-dir run --device reference --feature amp:speed=2",
            {"check --feature amp:speed=2", "unknown key 'speed'"}, 0),
        cli("profile_in_a_missing_directory",
            "train model.toml --run-dir run --device reference --profile nodir/t.json",
            {"--profile nodir/t.json"}, 4),
        cli("run_dir_a_file", "train model.toml --device reference --run-dir model.toml",
            {"--run-dir model.toml"}, 0),
        cli("keep_checkpoints_zero", "train model.toml --run-dir run --keep-checkpoints 0",
            {"--keep-checkpoints"}),
        cli("checkpoint_every_text", "train model.toml --run-dir run --checkpoint-every soon", {"soon"}),
        cli("log_level_unknown", "--log-level loud devices", {"loud"}),
        cli("plan_of_a_bad_model", "plan model.toml --set train.lr=-1", {"lr"}, 4),
        cli("eval_without_weights", "eval model.toml --device reference", {"--weights"}, 0),
        BadInput{"quantize_unknown_calibrator",
                 "quantize model.toml --device reference --weights ckpt.safetensors --output int8 "
                 "--calibrator magic",
                 {"--calibrator", "magic"},
                 2,
                 [](const std::string& dir) { copy_trained_checkpoint(dir + "/ckpt.safetensors"); }},
        BadInput{"quantize_output_a_file",
                 "quantize model.toml --device reference --weights ckpt.safetensors --output model.toml",
                 {"model.toml"},
                 0,
                 [](const std::string& dir) { copy_trained_checkpoint(dir + "/ckpt.safetensors"); }},
        cli("bench_of_a_bad_model", "bench model.toml --set layers.fc.out_features=0", {"out_features"}, 4),
        cli("set_without_equals_on_plan", "plan model.toml --set layers", {"layers"}, 0),
        cli("option_value_missing", "train model.toml --run-dir", {"--run-dir"}),
        cli("device_with_spaces", "train model.toml --run-dir run --device 'reference 0'", {"reference 0"},
            0),
        cli("tensorboard_below_a_file",
            "train model.toml --run-dir run --device reference --tensorboard model.toml/tb",
            {"--tensorboard model.toml/tb", "cannot create the directory"}, 4),
        cli("report_without_a_run_dir", "report", {"report needs a run directory"}),
        cli("report_of_a_missing_run_dir", "report nosuch", {"nosuch: no such directory"}, 4),
        BadInput{"report_of_a_dir_without_metrics",
                 "report empty",
                 {"empty holds no metrics.jsonl"},
                 4,
                 [](const std::string& dir) { fs::create_directory(dir + "/empty"); }},
        BadInput{"report_of_a_torn_metrics_line",
                 "report run",
                 {"run/metrics.jsonl:2: not valid JSON", "delete or repair that line"},
                 4,
                 [](const std::string& dir) {
                   fs::create_directory(dir + "/run");
                   write_file(dir + "/run/metrics.jsonl", "{\"event\":\"step\",\"step\":1}\n{\"event\":\"st");
                 }},
        BadInput{"report_output_a_directory",
                 "report run --output run",
                 {"--output run: is a directory"},
                 2,
                 [](const std::string& dir) {
                   fs::create_directory(dir + "/run");
                   write_file(dir + "/run/metrics.jsonl", "{\"event\":\"step\",\"step\":1,\"loss\":1}\n");
                 }}),
    CaseName());

}  // namespace
}  // namespace tandem::test
