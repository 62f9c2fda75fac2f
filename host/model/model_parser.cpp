#include "model/model_parser.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "model/layer_schema.hpp"
#include "model/overrides.hpp"
#include "model/section_reader.hpp"
#include "model/train_section.hpp"
#include "util/fnv1a.hpp"

namespace tandem::host::model {
namespace {

// Identifies the model a checkpoint belongs to: the document after overrides,
// less the keys that only say how long or how verbosely to train (so a run
// can be resumed with more epochs) or where layers run (a checkpoint holds
// the same tensors on any device, whole however the ranks split them, and
// pipelined or not), in toml++'s canonical form. How a batch is split into
// micro-batches stays: a checkpoint's data position counts them.
std::string model_hash(const toml::table& doc) {
  toml::table copy = doc;
  if (toml::table* train = copy["train"].as_table())
    for (const char* key :
         {"epochs", "steps", "log_every", "keep_checkpoints", "checkpoint_every", "placement",
          "tensor_parallel", "zero", "zero_overlap", "comm", "pipeline", "pipeline_parallel", "pipeline_cut"})
      train->erase(key);
  if (toml::array* layers = copy["layers"].as_array())
    for (toml::node& layer : *layers)
      if (toml::table* t = layer.as_table()) {
        t->erase("device");
        t->erase("stream");
        if (toml::array* body = (*t)["body"].as_array())  // a repeat block's layers
          for (toml::node& inner : *body)
            if (toml::table* b = inner.as_table()) {
              b->erase("device");
              b->erase("stream");
            }
      }
  std::ostringstream canonical;
  canonical << copy;
  return hex64(fnv1a64(canonical.str()));
}

// A language model: [model] task = "language_model", context, vocab_size.
void read_language_model(Reader& r, const toml::table& t, ModelSpec& spec) {
  for (const char* key : {"input", "classes"})
    if (t.contains(key))
      r.fail(*t.get(key), std::string("[model] ") + key +
                              " does not apply to a language model: its input is `context` token ids and its "
                              "classes are the `vocab_size` tokens");
  int64_t context = 0, vocab = 0;
  if (!r.get(t, "context", context) || !r.get(t, "vocab_size", vocab)) {
    r.fail(t, "[model] task = \"language_model\" needs context = N (tokens per sample) and vocab_size = V");
    return;
  }
  r.check(t, "context", context >= 1, "[model] context = " + std::to_string(context) + " must be at least 1");
  r.check(t, "vocab_size", vocab >= 2,
          "[model] vocab_size = " + std::to_string(vocab) + " must be at least 2");
  spec.input_shape = {context};
  spec.classes = vocab;
}

void read_model(Reader& r, const toml::table& t, ModelSpec& spec) {
  r.check_keys(t, "[model]", {"name", "task", "input", "classes", "context", "vocab_size", "hf_dir"});
  r.get(t, "hf_dir", spec.hf_dir);
  r.get(t, "name", spec.name);
  r.get_choice(t, "task", spec.task, {"classify", "language_model"});
  if (spec.language_model()) return read_language_model(r, t, spec);
  for (const char* key : {"context", "vocab_size"})
    if (t.contains(key))
      r.fail(*t.get(key), std::string("[model] ") + key +
                              " is for task = \"language_model\"; a classifier has input and classes");
  r.get(t, "input", spec.input_shape);
  r.get(t, "classes", spec.classes);
  if (spec.input_shape.empty())
    r.fail(t, "[model] needs input = [...], the shape of one sample (e.g. [1, 28, 28])");
  for (int64_t d : spec.input_shape)
    r.check(t, "input", d > 0, "[model] input dimensions must be positive, got " + std::to_string(d));
  r.check(t, "classes", spec.classes >= 0,
          "[model] classes = " + std::to_string(spec.classes) +
              " must be positive (or left out: the last "
              "layer's width)");
}

void read_loss(Reader& r, const toml::table& t, LossSpec& loss) {
  r.check_keys(t, "[loss]", {"op", "label_smoothing"});
  r.get_choice(t, "op", loss.op, {"softmax_cross_entropy"});
  r.get(t, "label_smoothing", loss.label_smoothing);
  r.check(t, "label_smoothing", loss.label_smoothing >= 0 && loss.label_smoothing < 1,
          "[loss] label_smoothing must be in [0, 1)");
}

void read_data(Reader& r, const toml::table& t, DataSpec& d) {
  r.check_keys(t, "[data]",
               {"format",
                "train_images",
                "train_labels",
                "test_images",
                "test_labels",
                "train_csv",
                "test_csv",
                "label_column",
                "csv_header",
                "synthetic_samples",
                "synthetic_test_samples",
                "synthetic_noise",
                "synthetic_vocab",
                "validation_split",
                "normalize_mean",
                "normalize_std",
                "random_crop_padding",
                "horizontal_flip",
                "threads",
                "prefetch",
                "train_tokens",
                "val_tokens",
                "token_dtype",
                "windows_per_epoch"});
  r.get_choice(t, "format", d.format, {"idx", "csv", "synthetic", "tokens"});
  r.get(t, "train_tokens", d.train_tokens);
  r.get(t, "val_tokens", d.val_tokens);
  r.get_choice(t, "token_dtype", d.token_dtype, {"u8", "u16", "u32"});
  r.get(t, "windows_per_epoch", d.windows_per_epoch);
  r.check(t, "windows_per_epoch", d.windows_per_epoch >= 0,
          "[data] windows_per_epoch = " + std::to_string(d.windows_per_epoch) +
              " must be 0 (tokens / context) or more");
  if (d.format == "tokens" && d.train_tokens.empty())
    r.fail(t,
           "[data] format = \"tokens\" needs train_tokens = \"file\" (raw text with token_dtype = \"u8\", or "
           "uint16 token ids with \"u16\")");
  r.get(t, "train_images", d.train_images);
  r.get(t, "train_labels", d.train_labels);
  r.get(t, "test_images", d.test_images);
  r.get(t, "test_labels", d.test_labels);
  r.get(t, "train_csv", d.train_csv);
  r.get(t, "test_csv", d.test_csv);
  r.get(t, "label_column", d.label_column);
  r.get(t, "csv_header", d.csv_header);
  r.get(t, "synthetic_samples", d.synthetic_samples);
  r.get(t, "synthetic_test_samples", d.synthetic_test_samples);
  r.get(t, "synthetic_noise", d.synthetic_noise);
  r.get(t, "synthetic_vocab", d.synthetic_vocab);
  if (d.synthetic_vocab < 0)
    r.fail(t, "[data] synthetic_vocab must be 0 (real features) or a vocabulary size");
  r.get(t, "validation_split", d.validation_split);
  r.get(t, "normalize_mean", d.normalize_mean);
  r.get(t, "normalize_std", d.normalize_std);
  r.get(t, "random_crop_padding", d.random_crop_padding);
  r.get(t, "horizontal_flip", d.horizontal_flip);
  r.get(t, "threads", d.threads);
  r.get(t, "prefetch", d.prefetch);
  if (d.format == "idx" && (d.train_images.empty() || d.train_labels.empty()))
    r.fail(t, "[data] format = \"idx\" needs train_images and train_labels");
  if (d.format == "csv" && d.train_csv.empty()) r.fail(t, "[data] format = \"csv\" needs train_csv");
}

// Every [data] value in its range and consistent with [model] input, each
// error at the key's own place.
void check_data(Reader& r, const toml::table& t, const DataSpec& d, const std::vector<int64_t>& input) {
  const auto count = [](int64_t v) { return std::to_string(v); };
  r.check(t, "validation_split", d.validation_split >= 0 && d.validation_split < 1,
          "[data] validation_split = " + number_text(d.validation_split) + ": must be in [0, 1)");
  for (double s : d.normalize_std)
    r.check(t, "normalize_std", s > 0,
            "[data] normalize_std entries must be positive, got " + number_text(s));
  const bool image = input.size() == 3;
  const int64_t channels = image ? input[0] : 1;
  for (const auto& [key, values] :
       {std::pair<const char*, const std::vector<double>&>{"normalize_mean", d.normalize_mean},
        {"normalize_std", d.normalize_std}})
    r.check(
        t, key, values.empty() || values.size() == 1 || int64_t(values.size()) == channels,
        std::string("[data] ") + key + " has " + count(int64_t(values.size())) +
            " values but the input has " +
            (channels == 1 ? std::string("one channel: give one value")
                           : count(channels) + " channels: give 1 (every channel) or " + count(channels)));
  r.check(t, "random_crop_padding", d.random_crop_padding >= 0,
          "[data] random_crop_padding = " + count(d.random_crop_padding) + ": must not be negative");
  r.check(t, "horizontal_flip", d.horizontal_flip >= 0 && d.horizontal_flip <= 1,
          "[data] horizontal_flip = " + number_text(d.horizontal_flip) + ": a probability, in [0, 1]");
  r.check(t, "random_crop_padding", image || d.random_crop_padding == 0,
          "[data] random_crop_padding needs an image input [C, H, W] in [model] input");
  r.check(t, "horizontal_flip", image || d.horizontal_flip == 0,
          "[data] horizontal_flip needs an image input [C, H, W] in [model] input");
  for (const char* key : {"normalize_mean", "normalize_std"})
    r.check(t, key, d.format != "tokens" || (d.normalize_mean.empty() && d.normalize_std.empty()),
            std::string("[data] ") + key + " does not apply to token ids: leave it out");
  r.check(t, "threads", d.threads >= 1,
          "[data] threads = " + count(d.threads) + ": at least 1 loader thread");
  r.check(t, "prefetch", d.prefetch >= 1, "[data] prefetch = " + count(d.prefetch) + ": at least 1 batch");
  r.check(t, "label_column", d.label_column >= 0,
          "[data] label_column = " + count(d.label_column) + ": must not be negative");
  r.check(t, "synthetic_samples", d.synthetic_samples > 0,
          "[data] synthetic_samples = " + count(d.synthetic_samples) + ": must be positive");
  r.check(t, "synthetic_test_samples", d.synthetic_test_samples >= 0,
          "[data] synthetic_test_samples = " + count(d.synthetic_test_samples) + ": must not be negative");
  r.check(t, "synthetic_noise", d.synthetic_noise >= 0,
          "[data] synthetic_noise = " + number_text(d.synthetic_noise) + ": must not be negative");
}

void read_layer(Reader& r, const toml::table& t, size_t index, std::set<std::string>& names,
                LayerSpec& layer) {
  layer.where = r.location(t);
  const std::string label = "layer " + std::to_string(index + 1);
  if (!r.require(t, "op", layer.op, "[[layers]] entry " + std::to_string(index + 1))) return;
  r.get(t, "name", layer.name);
  if (layer.name.empty()) layer.name = layer.op + std::to_string(index + 1);
  const std::string who = "layer '" + layer.name + "' (" + layer.op + ")";
  const LayerSchema* schema = find_layer_schema(layer.op);
  if (schema == nullptr) {
    std::vector<std::string> known;
    for (const auto& s : layer_schemas()) known.push_back(s.op);
    r.fail(*t.get("op"), who + ": unknown op '" + layer.op + "'" + did_you_mean(layer.op, known) +
                             "; expected one of: " + join(known));
    return;
  }
  if (!names.insert(layer.name).second) r.fail(t, who + ": the name '" + layer.name + "' is used twice");
  std::vector<std::string> keys = {"name", "op", "inputs", "device", "stream", "trainable"};
  for (const auto& a : schema->attrs) keys.push_back(a.key);
  r.check_keys(t, who, keys);
  r.get(t, "inputs", layer.inputs);
  std::string device;
  if (r.get(t, "device", device)) layer.device = device;
  bool stream = false;
  if (r.get(t, "stream", stream)) layer.stream = stream;
  r.get(t, "trainable", layer.trainable);
  if (static_cast<int>(std::max<size_t>(layer.inputs.size(), 1)) < schema->min_inputs ||
      static_cast<int>(layer.inputs.size()) > schema->max_inputs)
    r.fail(t,
           who + ": takes " + std::to_string(schema->min_inputs) +
               (schema->max_inputs != schema->min_inputs ? " to " + std::to_string(schema->max_inputs) : "") +
               " input(s), inputs = [...] lists " + std::to_string(layer.inputs.size()));
  for (const auto& a : schema->attrs) r.get_attr(t, who, a, layer.attrs);
  (void)label;
}

// [[layers]] op = "repeat": `count` copies of the layers in its
// [[layers.body]] tables, named "<block>.<i>.<layer>". Inside the body the
// block's own name means the block's input (the previous copy's last layer,
// or the layer before the block), a body layer's name its copy in the same
// iteration; after the block, the block's name means its last layer.
// `device`: one device for every copy, or a list of one per copy (a
// model's blocks split over the stages of a pipeline); a body layer's own
// `device` wins.
std::vector<std::string> repeat_devices(Reader& r, const toml::table& t, const std::string& who,
                                        int64_t count) {
  const toml::node* d = t.get("device");
  if (d == nullptr) return {};
  if (auto one = d->value<std::string>()) return std::vector<std::string>(size_t(count), *one);
  const toml::array* list = d->as_array();
  std::vector<std::string> devices;
  if (list != nullptr)
    for (const toml::node& e : *list)
      if (auto name = e.value<std::string>()) devices.push_back(*name);
  if (list == nullptr || devices.size() != list->size() || int64_t(devices.size()) != count) {
    r.fail(*d, who + ": device must be one device for every copy (device = \"cpu\") or a list of " +
                   std::to_string(count) + " devices, one per copy");
    return {};
  }
  return devices;
}

void read_repeat(Reader& r, const toml::table& t, std::set<std::string>& names, std::vector<LayerSpec>& out,
                 std::map<std::string, std::string>& aliases) {
  std::string block;
  int64_t count = 0;
  r.check_keys(t, "[[layers]] op = \"repeat\"", {"name", "op", "count", "body", "trainable", "device"});
  bool trainable = true;  // false: every layer of every copy
  r.get(t, "trainable", trainable);
  if (!r.require(t, "name", block, "a repeat block")) return;
  const std::string who = "repeat block '" + block + "'";
  if (!r.get(t, "count", count) || count < 1) {
    r.fail(t, who + ": needs count = N (at least 1), the number of copies");
    return;
  }
  const toml::array* body = t["body"].as_array();
  if (body == nullptr || body->empty()) {
    r.fail(t, who + ": needs its layers as [[layers.body]] tables after it");
    return;
  }
  if (!names.insert(block).second) r.fail(t, who + ": the name '" + block + "' is used twice");
  const std::vector<std::string> devices = repeat_devices(r, t, who, count);
  std::vector<LayerSpec> layers;
  std::set<std::string> local;
  for (size_t i = 0; i < body->size(); ++i) {
    const toml::table* b = (*body)[i].as_table();
    if (b == nullptr || (*b)["op"].value_or(std::string()) == "repeat") {
      r.fail((*body)[i], who + ": body entries must be [[layers.body]] tables of layers (no nested repeat)");
      return;
    }
    layers.emplace_back();
    read_layer(r, *b, i, local, layers.back());
  }
  std::string input = out.empty() ? "input" : out.back().name;
  for (int64_t i = 0; i < count && !r.error(); ++i) {
    const std::string prefix = block + "." + std::to_string(i) + ".";
    for (LayerSpec copy : layers) {
      copy.name = prefix + copy.name;
      copy.trainable = copy.trainable && trainable;
      if (!copy.device && !devices.empty()) copy.device = devices[size_t(i)];
      for (std::string& in : copy.inputs) in = in == block ? input : local.count(in) ? prefix + in : in;
      if (!names.insert(copy.name).second) r.fail(t, who + ": the name '" + copy.name + "' is used twice");
      out.push_back(std::move(copy));
    }
    input = out.back().name;
  }
  aliases[block] = input;
}

void read_layers(Reader& r, const toml::array& layers, std::vector<LayerSpec>& out) {
  std::set<std::string> names;
  std::map<std::string, std::string> aliases;  // repeat block -> its last layer
  for (size_t i = 0; i < layers.size(); ++i) {
    const toml::table* t = layers[i].as_table();
    if (t == nullptr) {
      r.fail(layers[i], "layers must be written as [[layers]] tables");
      continue;
    }
    if ((*t)["op"].value_or(std::string()) == "repeat") {
      read_repeat(r, *t, names, out, aliases);
      continue;
    }
    out.emplace_back();
    read_layer(r, *t, i, names, out.back());
    for (std::string& in : out.back().inputs)
      if (auto a = aliases.find(in); a != aliases.end()) in = a->second;
  }
}

void read_lora(Reader& r, const toml::table& t, LoraSpec& lora) {
  r.check_keys(t, "[features.lora]", {"rank", "alpha", "dropout", "targets", "base"});
  lora.enabled = true;
  r.get(t, "rank", lora.rank);
  r.get(t, "alpha", lora.alpha);
  r.get(t, "dropout", lora.dropout);
  r.get(t, "targets", lora.targets);
  r.get(t, "base", lora.base);
  r.check(t, "base", lora.base == "f32" || lora.base == "bf16" || lora.base == "int8",
          "[features.lora] base must be \"f32\", \"bf16\" or \"int8\" (how the frozen linear weights are "
          "stored)");
  r.check(t, "rank", lora.rank >= 1, "[features.lora] rank must be at least 1");
  r.check(t, "alpha", lora.alpha > 0, "[features.lora] alpha must be positive");
  r.check(t, "dropout", lora.dropout >= 0 && lora.dropout < 1, "[features.lora] dropout must be in [0, 1)");
  if (lora.targets.empty())
    r.fail(t,
           "[features.lora] needs targets = [\"<layer pattern>\", ...]: the linear layers or attention "
           "projections that get adapters, e.g. [\"layers.*.self_attn.q\", \"layers.*.self_attn.v\"]");
}

void read_features(Reader& r, const toml::table& t, ModelSpec& spec) {
  for (const auto& [name, node] : t) {
    const toml::table* section = node.as_table();
    if (section == nullptr) {
      r.fail(node, "[features] entries must be tables: [features." + std::string(name.str()) + "]");
      continue;
    }
    if (name.str() == "lora") {
      read_lora(r, *section, spec.lora);
      continue;
    }
    auto& out = spec.features[std::string(name.str())];
    auto& origins = spec.feature_origins[std::string(name.str())];
    auto note = [&](const toml::node& n) {
      const std::string where = r.location(n).str();
      if (std::find(origins.begin(), origins.end(), where) == origins.end()) origins.push_back(where);
    };
    note(*section);
    for (const auto& [key, value] : *section) {
      out[std::string(key.str())] = r.scalar_text(value);
      if (r.location(value).line == 0) note(value);  // an override's key; the file's are in its section
    }
  }
}

}  // namespace

Result<ModelSpec> parse_model_text(const std::string& text, const std::string& path,
                                   const std::vector<std::string>& overrides) {
  toml::table doc;
  try {
    doc = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    return make_error(path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) + ": " +
                          std::string(e.description()),
                      TDM_INVALID_ARGUMENT);
  }
  OverrideOrigins origins;
  if (auto applied = apply_overrides(doc, overrides, origins); !applied) return applied.error();

  ModelSpec spec;
  spec.path = path;
  spec.source_hash = model_hash(doc);

  Reader r(path, &origins);
  r.check_keys(doc, "the model file", {"model", "layers", "loss", "train", "data", "features"});
  if (const toml::table* m = r.table(doc, "model", true)) read_model(r, *m, spec);
  if (const toml::table* l = r.table(doc, "loss", false)) read_loss(r, *l, spec.loss);
  if (const toml::table* t = r.table(doc, "train", false)) read_train(r, *t, spec.train);
  if (const toml::table* d = r.table(doc, "data", false)) {
    spec.data.given = true;
    read_data(r, *d, spec.data);
    check_data(r, *d, spec.data, spec.input_shape);
    if ((spec.data.format == "tokens") != spec.language_model())
      r.fail(
          *d,
          spec.language_model()
              ? "a language model ([model] task = \"language_model\") reads [data] format = \"tokens\""
              : "[data] format = \"tokens\" is for a language model: set [model] task = \"language_model\", "
                "context and vocab_size");
  }
  if (const toml::table* f = r.table(doc, "features", false)) read_features(r, *f, spec);
  const toml::array* layers = doc["layers"].as_array();
  if (layers == nullptr || layers->empty()) {
    r.fail(doc, "the model has no layers: add [[layers]] entries with op = \"...\"");
  } else {
    read_layers(r, *layers, spec.layers);
  }
  if (const toml::table* t = r.table(doc, "train", false); t != nullptr && spec.train.tensor_parallel > 1) {
    const bool split = std::any_of(spec.layers.begin(), spec.layers.end(), [](const LayerSpec& l) {
      return l.string_attr("parallel", "none") != "none";
    });
    r.check(
        *t, "tensor_parallel", split,
        "[train] tensor_parallel = " + std::to_string(spec.train.tensor_parallel) +
            ", but no layer is marked `parallel`: mark the layers to split (parallel = \"column\", \"row\", "
            "\"heads\" or \"vocab\"), or leave tensor_parallel out for data parallelism alone");
  }
  if (r.error()) return make_error(*r.error(), TDM_INVALID_ARGUMENT);
  return spec;
}

Result<ModelSpec> parse_model_file(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty())
    return make_error("the model file name is empty: give the path of a .toml file", TDM_INVALID_ARGUMENT);
  if (std::filesystem::is_directory(path))
    return make_error(
        path + " is a directory, not a model file: name the .toml file (e.g. " + path + "/model.toml)",
        TDM_INVALID_ARGUMENT);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(path + ": cannot open the model file (" + std::string(std::strerror(errno)) + ")",
                      TDM_NOT_FOUND);
  std::stringstream text;
  text << in.rdbuf();
  return parse_model_text(text.str(), path, overrides);
}

}  // namespace tandem::host::model
