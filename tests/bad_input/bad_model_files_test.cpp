// Mistakes in model files and in --set: each is an error at the key's
// file:line:column (or at the --set that made it) naming the key or layer.
#include "bad_input.hpp"

#include <stdexcept>

namespace tandem::test {
namespace {

const char* const kTrain = "train model.toml --device reference --run-dir run";

// The base model with `from` replaced by `to`; the error must say each of `says`.
BadInput edit(const std::string& name, const std::string& from, const std::string& to,
              std::vector<std::string> says, int code = 4) {
  return {name, kTrain, std::move(says), code,
          [from, to](const std::string& dir) { write_file(dir + "/model.toml", base_model_with(from, to)); }};
}

// A model file of exactly `text`.
BadInput whole(const std::string& name, const std::string& text, std::vector<std::string> says,
               int code = 4) {
  return {name, kTrain, std::move(says), code,
          [text](const std::string& dir) { write_file(dir + "/model.toml", text); }};
}

// The base model with one more layer before fc.
BadInput extra_layer(const std::string& name, const std::string& layer, std::vector<std::string> says) {
  return edit(name, "[[layers]]\nname = \"fc\"", layer + "\n\n[[layers]]\nname = \"fc\"", std::move(says));
}

BadInput set(const std::string& name, const std::string& overrides, std::vector<std::string> says,
             int code = 4) {
  return {name, std::string(kTrain) + " " + overrides, std::move(says), code, nullptr};
}

class ModelFile : public BadInputTest {};

TEST_P(ModelFile, IsRefusedClearly) {
  run_bad_input(GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    ModelSection, ModelFile,
    ::testing::Values(
        edit("classes_negative", "classes = 4", "classes = -3", {"model.toml:4:", "classes = -3"}),
        edit("classes_text", "classes = 4", "classes = \"four\"", {"model.toml:4:", "classes"}),
        edit("input_missing", "input = [1, 8, 8]\n", "", {"model.toml:", "input"}),
        edit("input_zero", "input = [1, 8, 8]", "input = [1, 0, 8]", {"model.toml:3:", "input"}),
        edit("input_negative", "input = [1, 8, 8]", "input = [1, -8, 8]", {"model.toml:3:", "input"}),
        edit("input_not_a_list", "input = [1, 8, 8]", "input = \"8x8\"", {"model.toml:3:", "input"}),
        edit("input_of_floats", "input = [1, 8, 8]", "input = [1.5, 8, 8]", {"model.toml:3:", "input"}),
        edit("input_too_large", "input = [1, 8, 8]", "input = [1, 100000, 100000]", {"input"}),
        edit("name_a_number", "name = \"case\"", "name = 5", {"model.toml:2:", "name"}),
        edit("unknown_model_key", "classes = 4", "classes = 4\ncolour = \"red\"",
             {"model.toml:5:", "colour"}),
        edit("unknown_section", "[train]", "[optimiser]\nlr = 1\n\n[train]", {"model.toml:", "optimiser"}),
        edit("model_section_missing", "[model]\nname = \"case\"\ninput = [1, 8, 8]\nclasses = 4\n", "",
             {"model.toml", "[model]"}),
        edit("syntax_error", "lr = 0.05", "lr = = 0.05", {"model.toml:29:"}),
        edit("unterminated_string", "name = \"case\"", "name = \"case", {"model.toml:2:"}),
        edit("duplicate_key", "lr = 0.05", "lr = 0.05\nlr = 0.1", {"model.toml:30:", "lr"}),
        whole("empty_file", "", {"model.toml", "[model]"}),
        whole("binary_file",
              std::string("\x7f"
                          "ELF\x02\x01\x01\0\0\0\xff\xfe",
                          14),
              {"model.toml"}),
        whole("invalid_utf8", "[model]\nname = \"\xc3\x28\"\n", {"model.toml:2:"}),
        whole("only_comments", "# nothing here\n", {"model.toml", "[model]"}),
        BadInput{"model_file_missing", "train nosuch.toml --run-dir run", {"nosuch.toml"}, 4, nullptr},
        BadInput{"model_file_is_a_directory", "train {d} --run-dir run", {"{d}", "directory"}, 4, nullptr},
        BadInput{
            "model_file_name_empty", "train '' --run-dir run", {"model file name is empty"}, 4, nullptr}),
    CaseName());

INSTANTIATE_TEST_SUITE_P(
    Layers, ModelFile,
    ::testing::Values(
        edit("unknown_op", "op = \"conv2d\"", "op = \"conv3d\"", {"model.toml:8:", "conv3d", "conv1"}),
        edit("op_missing", "op = \"flatten\"\n", "", {"model.toml:", "op"}),
        edit("duplicate_name", "name = \"pool1\"", "name = \"conv1\"", {"model.toml:", "conv1", "twice"}),
        edit("out_features_zero", "out_features = 4", "out_features = 0",
             {"model.toml:26:", "fc", "out_features"}),
        edit("out_features_negative", "out_features = 4", "out_features = -5",
             {"model.toml:26:", "fc", "out_features"}),
        edit("out_features_float", "out_features = 4", "out_features = 4.5",
             {"model.toml:26:", "out_features"}),
        edit("out_features_text", "out_features = 4", "out_features = \"four\"",
             {"model.toml:26:", "out_features"}),
        edit("out_features_huge", "out_features = 4", "out_features = 1000000000000", {"fc"}),
        edit("out_channels_zero", "out_channels = 4", "out_channels = 0", {"model.toml:9:", "conv1"}),
        edit("conv_kernel_zero", "kernel = 3", "kernel = 0", {"model.toml:10:", "conv1", "kernel"}),
        edit("conv_kernel_larger_than_input", "kernel = 3\npadding = 1", "kernel = 21\npadding = 1",
             {"conv1", "kernel"}),
        edit("conv_kernel_list_too_long", "kernel = 3", "kernel = [3, 3, 3]", {"model.toml:10:", "kernel"}),
        edit("conv_stride_zero", "padding = 1", "padding = 1\nstride = 0",
             {"model.toml:12:", "conv1", "stride"}),
        edit("conv_padding_negative", "padding = 1", "padding = -1", {"model.toml:11:", "conv1", "padding"}),
        edit("conv_dilation_zero", "padding = 1", "padding = 1\ndilation = 0",
             {"model.toml:12:", "dilation"}),
        edit("conv_groups_not_dividing", "padding = 1", "padding = 1\ngroups = 3", {"conv1", "groups"}),
        edit("conv_has_no_activation_key", "bias = true", "activation = \"relu\"",
             {"model.toml:12:", "conv1", "activation"}),
        edit("pool_kernel_negative", "op = \"max_pool2d\"\nkernel = 2", "op = \"max_pool2d\"\nkernel = -2",
             {"model.toml:17:", "pool1", "kernel"}),
        edit("pool_kernel_larger_than_input", "op = \"max_pool2d\"\nkernel = 2",
             "op = \"max_pool2d\"\nkernel = 9", {"pool1"}),
        edit("unknown_layer_key", "out_features = 4", "out_features = 4\ncolour = 3",
             {"model.toml:27:", "colour"}),
        edit("inputs_unknown_layer", "op = \"flatten\"", "op = \"flatten\"\ninputs = [\"nope\"]",
             {"flat", "nope"}),
        edit("bias_not_bool", "out_features = 4", "out_features = 4\nbias = \"yes\"",
             {"model.toml:27:", "bias"}),
        edit("init_unknown", "out_features = 4", "out_features = 4\ninit = \"magic\"",
             {"model.toml:27:", "magic"}),
        edit("device_unknown", "out_features = 4", "out_features = 4\ndevice = \"tpu:0\"", {"fc", "tpu:0"}),
        edit("layers_not_an_array", "[[layers]]\nname = \"conv1\"", "[layers]\nname = \"conv1\"",
             {"model.toml:", "layers"}),
        BadInput{"no_layers",
                 kTrain,
                 {"model.toml", "layers"},
                 4,
                 [](const std::string& dir) {
                   const std::string base = kBaseModel;
                   write_file(dir + "/model.toml",
                              base.substr(0, base.find("[[layers]]")) + base.substr(base.find("[train]")));
                 }},
        extra_layer("dropout_p_above_one", "[[layers]]\nname = \"drop\"\nop = \"dropout\"\np = 1.5",
                    {"model.toml:", "drop", "p"}),
        extra_layer("batch_norm_epsilon_negative",
                    "[[layers]]\nname = \"bn\"\nop = \"batch_norm\"\nepsilon = -1.0",
                    {"model.toml:", "bn", "epsilon"}),
        extra_layer("add_with_one_input", "[[layers]]\nname = \"sum\"\nop = \"add\"\ninputs = [\"flat\"]",
                    {"model.toml:", "sum"}),
        extra_layer("gelu_approximation_unknown",
                    "[[layers]]\nname = \"g\"\nop = \"gelu\"\napproximate = \"fast\"",
                    {"model.toml:", "fast"}),
        edit("classes_disagree_with_last_layer", "classes = 4", "classes = 10", {"classes", "fc"})),
    CaseName());

INSTANTIATE_TEST_SUITE_P(
    TrainSection, ModelFile,
    ::testing::Values(
        edit("lr_negative", "lr = 0.05", "lr = -1.0", {"model.toml:29:", "lr"}),
        edit("lr_nan", "lr = 0.05", "lr = nan", {"model.toml:29:", "lr"}),
        edit("lr_inf", "lr = 0.05", "lr = inf", {"model.toml:29:", "lr"}),
        edit("lr_text", "lr = 0.05", "lr = \"fast\"", {"model.toml:29:", "lr"}),
        edit("batch_size_zero", "batch_size = 8", "batch_size = 0", {"model.toml:31:", "batch_size"}),
        edit("batch_size_negative", "batch_size = 8", "batch_size = -8", {"model.toml:31:", "batch_size"}),
        edit("batch_size_above_the_data", "batch_size = 8", "batch_size = 1000", {"batch"}),
        edit("epochs_negative", "epochs = 1", "epochs = -1", {"model.toml:32:", "epochs"}),
        edit("steps_negative", "epochs = 1", "steps = -5", {"model.toml:32:", "steps"}),
        edit("warmup_negative", "epochs = 1", "epochs = 1\nwarmup_steps = -10",
             {"model.toml:33:", "warmup_steps"}),
        edit("epsilon_negative", "epochs = 1", "epochs = 1\noptimizer = \"adamw\"\nepsilon = -1e-8",
             {"model.toml:34:", "epsilon"}),
        edit("beta2_one", "epochs = 1", "epochs = 1\noptimizer = \"adamw\"\nbeta2 = 1.0",
             {"model.toml:34:", "beta2"}),
        edit("optimizer_unknown", "epochs = 1", "epochs = 1\noptimizer = \"lbfgs\"",
             {"model.toml:33:", "lbfgs"}),
        edit("schedule_unknown", "epochs = 1", "epochs = 1\nschedule = \"linear\"",
             {"model.toml:33:", "linear"}),
        edit("clip_negative", "epochs = 1", "epochs = 1\nclip_grad_norm = -1.0",
             {"model.toml:33:", "clip_grad_norm"}),
        edit("tensor_parallel_negative", "epochs = 1", "epochs = 1\ntensor_parallel = -2",
             {"model.toml:33:", "tensor_parallel"}),
        edit("tensor_parallel_without_parallel_layers", "epochs = 1", "epochs = 1\ntensor_parallel = 2",
             {"model.toml:33:", "no layer is marked `parallel`"}),
        edit("keep_checkpoints_zero", "epochs = 1", "epochs = 1\nkeep_checkpoints = 0",
             {"model.toml:33:", "keep_checkpoints"}),
        edit("log_every_zero", "epochs = 1", "epochs = 1\nlog_every = 0", {"model.toml:33:", "log_every"}),
        edit("placement_unknown", "epochs = 1", "epochs = 1\nplacement = \"random\"",
             {"model.toml:33:", "random"}),
        edit("checkpoint_every_text", "epochs = 1", "epochs = 1\ncheckpoint_every = \"soon\"",
             {"model.toml:33:", "soon"}),
        edit("checkpoint_every_zero", "epochs = 1", "epochs = 1\ncheckpoint_every = 0",
             {"model.toml:33:", "checkpoint_every"}),
        edit("unknown_train_key", "epochs = 1", "epochs = 1\nlearning_rate = 0.1",
             {"model.toml:33:", "learning_rate"}),
        edit("momentum_text", "momentum = 0.9", "momentum = \"high\"", {"model.toml:30:", "momentum"}),
        edit("weight_decay_negative", "epochs = 1", "epochs = 1\nweight_decay = -0.1",
             {"model.toml:33:", "weight_decay"}),
        edit("optimizer_device_unknown", "epochs = 1", "epochs = 1\noptimizer_device = \"tpu\"", {"tpu"}),
        edit("pipeline_cut_without_stages", "epochs = 1", "epochs = 1\npipeline_cut = [\"fc2\"]",
             {"model.toml:33:", "pipeline_cut", "pipeline_parallel = 2 or more"}),
        edit("loss_op_unknown", "[train]", "[loss]\nop = \"mse\"\n\n[train]", {"model.toml:29:", "mse"}),
        edit("label_smoothing_one", "[train]", "[loss]\nlabel_smoothing = 1.5\n\n[train]",
             {"model.toml:29:", "label_smoothing"}),
        edit("feature_unknown", "[data]", "[features.turbo]\nlevel = 3\n\n[data]", {"turbo"}),
        edit("feature_not_a_table", "[data]", "[features]\nturbo = 1\n\n[data]", {"model.toml:", "features"}),
        edit("amp_dtype_unknown", "[data]", "[features.amp]\ndtype = \"f8\"\n\n[data]", {"amp", "f8"}),
        edit("grad_accum_zero", "[data]", "[features.grad_accum]\nsteps = 0\n\n[data]",
             {"grad_accum", "steps"})),
    CaseName());

// A small byte-level language model on text.txt, and its mistakes.
const char* const kLanguageModel = R"([model]
name = "lm"
task = "language_model"
context = 8
vocab_size = 256

[[layers]]
name = "tok"
op = "embedding"
num_embeddings = 256
embedding_dim = 16

[[layers]]
name = "h"
op = "repeat"
count = 2

  [[layers.body]]
  name = "attn"
  op = "attention"
  heads = 4

  [[layers.body]]
  name = "res"
  op = "add"
  inputs = ["h", "attn"]

[[layers]]
name = "head"
op = "linear"
out_features = 256
tie_weight = "tok"

[train]
batch_size = 4
steps = 2

[data]
format = "tokens"
train_tokens = "text.txt"
)";

std::string lm_with(const std::string& from, const std::string& to) {
  std::string text = kLanguageModel;
  const size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("the language model has no '" + from + "'");
  return text.replace(at, from.size(), to);
}

BadInput lm(const std::string& name, const std::string& from, const std::string& to,
            std::vector<std::string> says, const std::string& tokens = std::string(200, 'a')) {
  return {name, kTrain, std::move(says), 4, [from, to, tokens](const std::string& dir) {
            write_file(dir + "/model.toml", lm_with(from, to));
            write_file(dir + "/text.txt", tokens);
          }};
}

INSTANTIATE_TEST_SUITE_P(
    LanguageModel, ModelFile,
    ::testing::Values(
        lm("lm_context_missing", "context = 8\n", "", {"model.toml:", "context"}),
        lm("lm_with_classes", "vocab_size = 256", "vocab_size = 256\nclasses = 3",
           {"model.toml:6:", "classes does not apply to a language model"}),
        lm("lm_on_idx_data", "format = \"tokens\"",
           "format = \"idx\"\ntrain_images = \"a\"\ntrain_labels = \"b\"",
           {"model.toml:", "format = \"tokens\""}),
        lm("lm_tokens_missing", "train_tokens = \"text.txt\"", "train_tokens = \"nosuch.txt\"",
           {"nosuch.txt", "cannot open"}),
        lm("lm_tokens_a_directory", "train_tokens = \"text.txt\"", "train_tokens = \".\"",
           {"is a directory"}),
        lm("lm_text_shorter_than_context", "context = 8", "context = 512",
           {"text.txt", "fewer than one window"}),
        lm("lm_odd_bytes_as_u16", "train_tokens = \"text.txt\"",
           "train_tokens = \"text.txt\"\ntoken_dtype = \"u16\"", {"text.txt", "token_dtype"}, "odd"),
        lm("lm_token_beyond_vocab", "vocab_size = 256", "vocab_size = 90", {"text.txt", "vocab_size = 90"}),
        lm("lm_repeat_count_zero", "count = 2", "count = 0", {"model.toml:", "repeat block 'h'", "count"}),
        lm("lm_heads_do_not_split", "heads = 4", "heads = 5", {"h.0.attn", "heads"}),
        lm("lm_kv_heads_do_not_divide", "heads = 4", "heads = 4\n  kv_heads = 3", {"h.0.attn", "kv_heads"}),
        lm("lm_tie_to_nothing", "tie_weight = \"tok\"", "tie_weight = \"nosuch\"",
           {"head", "tie_weight", "nosuch"}),
        lm("lm_tie_wrong_shape", "out_features = 256", "out_features = 100", {"head", "tie_weight"}),
        lm("lm_head_not_vocab", "out_features = 256\ntie_weight = \"tok\"", "out_features = 10",
           {"head", "vocab_size = 256"}),
        lm("lm_token_dtype_unknown", "format = \"tokens\"", "format = \"tokens\"\ntoken_dtype = \"f32\"",
           {"model.toml:", "token_dtype"})),
    CaseName());

INSTANTIATE_TEST_SUITE_P(
    Overrides, ModelFile,
    ::testing::Values(set("set_lr_text", "--set train.lr=fast", {"--set train.lr=fast", "lr"}),
                      set("set_unknown_section", "--set nosuch.key=1", {"--set nosuch.key=1", "nosuch"}),
                      set("set_unknown_layer", "--set layers.nosuch.out_features=3", {"nosuch"}),
                      set("set_batch_negative", "--set train.batch_size=-1", {"--set train.batch_size=-1"}),
                      set("set_without_value", "--set train.lr", {"train.lr"}),
                      set("set_out_features_zero", "--set layers.fc.out_features=0",
                          {"--set layers.fc.out_features=0", "fc"}),
                      set("set_unknown_key", "--set train.learning_rate=0.1", {"learning_rate"}),
                      set("set_lr_nan", "--set train.lr=nan", {"--set train.lr=nan"}),
                      set("set_empty_path", "--set =3", {"--set =3"})),
    CaseName());

}  // namespace
}  // namespace tandem::test
