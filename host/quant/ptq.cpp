#include "quant/ptq.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "data/loader.hpp"
#include "exec/executor.hpp"
#include "lowering/model_graph.hpp"
#include "program/program.hpp"
#include "quant/observer.hpp"
#include "train/checkpointing.hpp"

namespace tandem::host::quant {
namespace fs = std::filesystem;
namespace {

// A layer to quantize and the graph value feeding it.
struct Target {
  std::string layer;
  std::string op;  // linear or conv2d
  ValueId input = kNoValue;
  int64_t features = 0;  // values per sample of the input ([batch, ...] row-major)
  Observer observer;
};

Result<std::vector<Target>> find_targets(const model::ModelSpec& spec, const lowering::ModelGraph& m) {
  std::vector<Target> targets;
  for (const auto& layer : spec.layers) {
    // A tied output head shares the embedding's f32 table, which the
    // embedding still reads: it stays f32.
    if (!lowering::has_int8_form(layer.op) || !layer.string_attr("tie_weight", "").empty()) continue;
    if (layer.string_attr("parallel", "none") != "none")
      return make_error(spec.path + ": layer '" + layer.name +
                            "' is tensor-parallel; quantize the model in one process without `parallel`",
                        TDM_INVALID_ARGUMENT);
    const Node* node = m.graph.node_by_name(layer.name);
    if (node != nullptr && node->op != layer.op)  // a language model's per-token linear: rows, then a reshape
      node = m.graph.node_by_name(layer.name + ".rows");
    if (node == nullptr || node->op != layer.op || node->inputs.empty())
      return make_error("internal: no " + layer.op + " node for layer '" + layer.name + "'", TDM_INTERNAL);
    Target t;
    t.layer = layer.name;
    t.op = layer.op;
    t.input = node->inputs[0];
    // Values per sample: a language model's token rows [B·T, C] hold T·C.
    int64_t values = 1;
    for (int64_t d : m.graph.value(t.input)->type.dims) values *= d;
    t.features = values / m.batch;
    targets.push_back(std::move(t));
  }
  if (targets.empty())
    return make_error(spec.path + ": has no linear or conv2d layer to quantize", TDM_INVALID_ARGUMENT);
  return targets;
}

// Runs the f32 graph over the calibration samples; `observe` sees each
// target's input rows of every batch.
template <class Observe>
Result<int64_t> calibration_pass(exec::Executor& ex, const lowering::ModelGraph& m,
                                 std::vector<Target>& targets, const data::Dataset& calib,
                                 const data::Transforms& transforms, const PtqOptions& o, Observe&& observe) {
  data::DataLoader loader(calib, {.batch_size = m.batch,
                                  .shuffle = false,
                                  .drop_last = true,
                                  .threads = o.loader_threads,
                                  .transforms = transforms});
  loader.start_epoch(0);
  int64_t seen = 0;
  std::vector<float> rows;
  while (seen < o.samples) {
    auto batch = loader.next();
    if (!batch) break;
    if (auto r = ex.write(m.input, batch->input_data(), batch->input_bytes()); !r) return r.error();
    if (auto r = ex.write(m.labels, batch->labels.data(), batch->labels.size() * sizeof(int32_t)); !r)
      return r.error();
    if (auto r = ex.run(); !r) return r.error();
    const int64_t take = std::min(batch->size, o.samples - seen);
    for (Target& t : targets) {
      rows.resize(size_t(batch->size * t.features));
      if (auto r = ex.read(t.input, rows.data(), rows.size() * sizeof(float)); !r) return r.error();
      observe(t, std::span<const float>(rows.data(), size_t(take * t.features)));
    }
    seen += take;
  }
  return seen;
}

Result<std::vector<float>> f32_tensor(const checkpoint::Checkpoint& cp, const std::string& name,
                                      const std::string& source) {
  const checkpoint::TensorRecord* t = cp.find(name);
  if (t == nullptr || t->dtype != TDM_F32)
    return make_error(source + ": has no f32 tensor '" + name + "' (is it an f32 checkpoint of this model?)",
                      TDM_INVALID_ARGUMENT);
  std::vector<float> v(t->data.size() / sizeof(float));
  std::memcpy(v.data(), t->data.data(), v.size() * sizeof(float));
  return v;
}

template <class T>
checkpoint::TensorRecord record(std::string name, tdm_dtype dtype, std::vector<int64_t> shape,
                                const std::vector<T>& values) {
  checkpoint::TensorRecord r{std::move(name), dtype, std::move(shape),
                             std::vector<std::byte>(values.size() * sizeof(T))};
  std::memcpy(r.data.data(), values.data(), r.data.size());
  return r;
}

}  // namespace

namespace {

// The calibration data through the f32 eval program: every target's
// observer sees its layer's input; returns the samples seen.
Result<int64_t> observe(const model::ModelSpec& spec, const DeviceHandle& device,
                        const PluginRegistry& registry, const checkpoint::Checkpoint& weights,
                        const std::string& source, const data::Dataset& calib,
                        const data::Transforms& transforms, const PtqOptions& o,
                        std::vector<Target>& targets) {
  const int64_t batch = std::min({spec.train.batch_size, o.samples, calib.size()});
  if (batch <= 0) return make_error("the calibration data set is empty", TDM_INVALID_ARGUMENT);
  program::ProgramOptions options;
  options.mode = lowering::Mode::Eval;
  options.batch = batch;
  auto built = program::Program::build(spec, device, registry, std::move(options));
  if (!built) return built.error();
  program::Program& p = **built;
  auto found = find_targets(spec, p.model());
  if (!found) return found.error();
  targets = std::move(*found);
  exec::ExecutorOptions exec_options;
  for (const Target& t : targets) exec_options.outputs.push_back(p.model().graph.value(t.input)->name);
  if (auto r = p.allocate(std::move(exec_options)); !r) return r.error();
  if (auto r = train::restore_tensors(p.model().graph, p.executor(), weights, true, source); !r)
    return r.error();
  auto range_pass = [](Target& t, std::span<const float> v) { t.observer.observe_range(v); };
  auto seen = calibration_pass(p.executor(), p.model(), targets, calib, transforms, o, range_pass);
  if (!seen) return seen.error();
  if (needs_histograms(o.method)) {
    for (Target& t : targets) t.observer.start_histograms();
    auto hist_pass = [](Target& t, std::span<const float> v) { t.observer.observe_histograms(v); };
    if (auto r = calibration_pass(p.executor(), p.model(), targets, calib, transforms, o, hist_pass); !r)
      return r.error();
  }
  return seen;
}

// Each target's calibration and s8 weights (with their scales), and the
// INT8 checkpoint: everything else copied, optimizer state left out.
Result<checkpoint::Checkpoint> quantize_layers(const std::vector<Target>& targets,
                                               const checkpoint::Checkpoint& weights,
                                               const std::string& source, const PtqOptions& o,
                                               Calibration& cal) {
  checkpoint::Checkpoint out;
  out.metadata = weights.metadata;
  out.metadata["tandem.quantized"] = "int8";
  out.metadata["tandem.calibration"] = kCalibrationFile;
  out.metadata["tandem.calibrator"] = cal.calibrator;
  std::map<std::string, checkpoint::TensorRecord> replaced;
  for (const Target& t : targets) {
    LayerCalibration lc;
    lc.op = t.op;
    lc.observed = minmax_range(t.observer);
    lc.clipped = calibrate(t.observer, o.method, o.percentile);
    lc.input = u8_params(lc.clipped);
    const std::string wname = t.layer + ".weight";
    auto w = f32_tensor(weights, wname, source);
    if (!w) return w.error();
    const std::vector<int64_t> shape = weights.find(wname)->shape;  // [out, ...]: per channel = per row
    const int64_t rows = shape.empty() ? 1 : shape[0];
    const QuantizedWeights q = quantize_weights(*w, rows, int64_t(w->size()) / std::max<int64_t>(rows, 1),
                                                o.per_channel, o.weight_range.qmax);
    lc.weight_scales = q.scales;
    replaced.emplace(wname, record(wname, TDM_S8, shape, q.values));
    replaced.emplace(t.layer + ".weight_scale",
                     record(t.layer + ".weight_scale", TDM_F32, {int64_t(q.scales.size())}, q.scales));
    cal.layers[t.layer] = lc;
  }
  for (const checkpoint::TensorRecord& t : weights.tensors) {
    if (t.name.rfind("optim.", 0) == 0) continue;
    if (auto it = replaced.find(t.name); it != replaced.end()) {
      out.tensors.push_back(std::move(it->second));
      replaced.erase(it);
    } else {
      out.tensors.push_back(t);
    }
  }
  for (auto& [name, t] : replaced) out.tensors.push_back(std::move(t));  // the weight scales
  return out;
}

}  // namespace

Result<PtqResult> quantize_model(const model::ModelSpec& spec, const DeviceHandle& device,
                                 const PluginRegistry& registry, const checkpoint::Checkpoint& weights,
                                 const std::string& source, const data::Dataset& calib,
                                 const data::Transforms& transforms, const PtqOptions& o) {
  if (o.samples <= 0) return make_error("--calib must be positive", TDM_INVALID_ARGUMENT);
  if (weights.metadata.count("tandem.quantized"))
    return make_error(source + ": is already an INT8 checkpoint; quantize the f32 checkpoint it came from",
                      TDM_INVALID_ARGUMENT);
  std::vector<Target> targets;
  auto seen = observe(spec, device, registry, weights, source, calib, transforms, o, targets);
  if (!seen) return seen.error();
  PtqResult result;
  Calibration& cal = result.calibration;
  cal.model = o.model_path;
  cal.calibrator = method_name(o.method);
  cal.percentile = o.percentile;
  cal.samples = *seen;
  cal.per_channel = o.per_channel;
  cal.weight_qmax = o.weight_range.qmax;
  cal.weight_range = o.weight_range.reason;
  auto out = quantize_layers(targets, weights, source, o, cal);
  if (!out) return out.error();
  std::error_code ec;
  fs::create_directories(o.output_dir, ec);
  if (ec)
    return make_error("--output " + o.output_dir + ": cannot create the directory (" + ec.message() +
                          "); give another --output",
                      TDM_INVALID_ARGUMENT);
  result.checkpoint_path = (fs::path(o.output_dir) / kInt8Checkpoint).string();
  result.calibration_path = (fs::path(o.output_dir) / kCalibrationFile).string();
  // The checkpoint first: a calibration file is only ever beside the
  // checkpoint it describes (both writes are atomic).
  if (auto r = checkpoint::write_safetensors(result.checkpoint_path, *out); !r) return r.error();
  if (auto r = write_calibration(result.calibration_path, cal); !r) return r.error();
  return result;
}

}  // namespace tandem::host::quant
