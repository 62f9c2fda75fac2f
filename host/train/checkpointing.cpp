#include "train/checkpointing.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <tuple>
#include <vector>

#include "checkpoint/float_tensors.hpp"
#include "checkpoint/torch_names.hpp"
#include "exec/tensor_text.hpp"
#include "hub/hf_config.hpp"
#include "hub/hf_weights.hpp"
#include "lowering/model_graph.hpp"
#include "ops/shapes.hpp"
#include "train/initializers.hpp"
#include "train/narrowed_bases.hpp"
#include "train/sharded_checkpoint.hpp"

namespace tandem::host::train {
namespace fs = std::filesystem;
namespace {

bool persistent(const Value& v) {
  return (v.kind == TDM_VALUE_PARAMETER || v.kind == TDM_VALUE_STATE) && !lowering::run_local(v);
}
bool optimizer_state(const Value& v) {
  return v.name.rfind("optim.", 0) == 0;
}

size_t bytes_of(const TensorType& t) {
  return exec::tensor_bytes(t);
}

std::vector<fs::path> checkpoints_in(const std::string& run_dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(checkpoint_dir(run_dir), ec)) {
    const std::string name = e.path().filename().string();
    const auto kind = e.path().extension();
    if (name.rfind("step-", 0) == 0 && (kind == ".safetensors" || (kind == ".sharded" && e.is_directory())))
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());  // zero-padded step numbers sort by step
  return files;
}

// A table of positions trained longer than this model's context, of which
// it takes the first rows (hub::kLeadingRowsKey marks such a tensor).
bool fits_leading_rows(const checkpoint::TensorRecord& t, const Value& v, const checkpoint::Checkpoint& cp) {
  const auto& want = v.type.dims;
  return cp.metadata.count(hub::kLeadingRowsKey + t.name) && t.shape.size() == want.size() && !want.empty() &&
         t.shape[0] > want[0] && std::equal(want.begin() + 1, want.end(), t.shape.begin() + 1);
}

}  // namespace

Result<checkpoint::Checkpoint> collect_tensors(const Graph& graph, exec::Executor& executor,
                                               std::map<std::string, std::string> metadata) {
  const TensorReader read = [&executor](ValueId value, void* host, size_t bytes) -> Result<bool> {
    if (auto r = executor.read(value, host, bytes); !r) return r.error();
    return true;
  };
  return collect_tensors(graph, read, std::move(metadata));
}

Result<checkpoint::Checkpoint> collect_tensors(const Graph& graph, const TensorReader& read,
                                               std::map<std::string, std::string> metadata) {
  checkpoint::Checkpoint cp;
  cp.metadata = std::move(metadata);
  for (size_t i = 0; i < graph.value_count(); ++i) {
    const Value& v = *graph.value_at(i);
    if (!persistent(v)) continue;
    checkpoint::TensorRecord t{v.name, v.type.dtype, v.type.dims, std::vector<std::byte>(bytes_of(v.type))};
    auto held = read(v.id, t.data.data(), t.data.size());
    if (!held) return held.error();
    if (*held) cp.tensors.push_back(std::move(t));
  }
  return cp;
}

Result<void> restore_tensors(const Graph& graph, exec::Executor& executor, const checkpoint::Checkpoint& cp,
                             bool weights_only, const std::string& source,
                             const std::set<ValueId>& new_parameters) {
  std::vector<std::pair<const Value*, const checkpoint::TensorRecord*>> plan;
  std::vector<const Value*> copies;  // states copied from their sources once those are loaded
  decltype(plan) leading;            // tables of which the model takes the first rows
  auto narrowed = narrowed_bases(graph, cp, source);
  if (!narrowed) return narrowed.error();
  for (size_t i = 0; i < graph.value_count(); ++i) {
    const Value& v = *graph.value_at(i);
    if (!persistent(v) || (weights_only && optimizer_state(v))) continue;
    const checkpoint::TensorRecord* t = narrowed->find(v.name);
    if (t == nullptr) t = cp.find(v.name);
    // A copied state follows the weights a run starts from (--init-from), or
    // a checkpoint written before its feature was enabled.
    if (!v.copy_of.empty() && (weights_only || t == nullptr)) {
      copies.push_back(&v);
      continue;
    }
    // Weights exported for PyTorch (or from it) name a norm's gamma and beta
    // "weight" and "bias" (checkpoint/torch_names.hpp).
    if (t == nullptr) t = cp.find(checkpoint::torch_name(v.name));
    if (t == nullptr) {
      if (optimizer_state(v) && v.type.dims.empty()) continue;  // lr/step/clip scalars are recomputed
      // Weights from elsewhere (--init-from a Hugging Face directory) have no
      // step counters (dropout's): a new run starts them afresh.
      if (weights_only && v.kind == TDM_VALUE_STATE && v.type.dims.empty()) continue;
      if (weights_only && new_parameters.count(v.id)) continue;  // a new adapter on loaded weights
      return make_error(source + ": has no tensor '" + v.name +
                            "' that this model needs (was it written for " + "another model file?)",
                        TDM_INVALID_ARGUMENT);
    }
    // bf16 and f16 weights (a Hugging Face directory's) widen exactly into f32.
    const bool widened = v.type.dtype == TDM_F32 && (t->dtype == TDM_BF16 || t->dtype == TDM_F16);
    const bool dtype_fits = t->dtype == v.type.dtype || widened;
    if (dtype_fits && fits_leading_rows(*t, v, cp)) {
      leading.emplace_back(&v, t);
      continue;
    }
    if (!dtype_fits || t->shape != v.type.dims)
      return make_error(source + ": tensor '" + v.name + "' is " + ops::dims_str(t->shape) + " (" +
                            exec::dtype_name(t->dtype) + ") but the model needs " +
                            ops::dims_str(v.type.dims) + " (" + exec::dtype_name(v.type.dtype) + ")",
                        TDM_INVALID_ARGUMENT);
    plan.emplace_back(&v, t);
  }
  // One tensor widened at a time, so a bf16 model directory loads in its own size.
  auto write = [&](const Value& v, const checkpoint::TensorRecord& t, size_t bytes) -> Result<void> {
    if (t.dtype == v.type.dtype) return executor.write(v.id, t.data.data(), bytes);
    auto values = checkpoint::as_f32(t, source);
    if (!values) return values.error();
    return executor.write(v.id, values->data(), bytes);
  };
  for (const auto& [v, t] : plan)
    if (auto r = write(*v, *t, bytes_of(v->type)); !r) return r;
  for (const auto& [v, t] : leading)  // row-major: the first rows are the first bytes
    if (auto r = write(*v, *t, bytes_of(v->type)); !r) return r;
  return copy_states_from_sources(graph, executor, copies);
}

Result<RunPosition> checkpoint_position(const checkpoint::Checkpoint& cp, const std::string& source) {
  RunPosition p;
  for (auto [key, out, low] : {std::tuple<const char*, int64_t*, int64_t>{"tandem.step", &p.step, 0},
                               {"tandem.epoch", &p.epoch, 0},
                               {"tandem.next_batch", &p.next_batch, 0},
                               {"tandem.world_size", &p.world_size, 1},
                               {"tandem.total_steps", &p.total_steps, 0}}) {
    auto it = cp.metadata.find(key);
    if (it == cp.metadata.end()) continue;
    const std::string& text = it->second;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || end == nullptr || *end != '\0' || errno == ERANGE || v < low)
      return make_error(source + ": its metadata says " + key + " = \"" + text + "\", which is not " +
                            (low == 0 ? "a count (0 or more)" : "a positive count") +
                            ": the checkpoint is damaged; resume from an earlier one in the same directory",
                        TDM_INVALID_ARGUMENT);
    *out = static_cast<int64_t>(v);
  }
  return p;
}

std::string checkpoint_dir(const std::string& run_dir) {
  return (fs::path(run_dir) / "checkpoints").string();
}

std::string checkpoint_file(const std::string& run_dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%09ld.safetensors", static_cast<long>(step));
  return (fs::path(checkpoint_dir(run_dir)) / name).string();
}

Result<std::string> save_checkpoint(const std::string& run_dir, int64_t step,
                                    const checkpoint::Checkpoint& cp, int64_t keep) {
  std::error_code ec;
  fs::create_directories(checkpoint_dir(run_dir), ec);
  if (ec)
    return make_error(checkpoint_dir(run_dir) + ": cannot create (" + ec.message() + ")",
                      TDM_INVALID_ARGUMENT);
  const std::string path = checkpoint_file(run_dir, step);
  if (auto r = checkpoint::write_safetensors(path, cp); !r) return r.error();
  remove_old_checkpoints(run_dir, keep);
  return path;
}

void remove_old_checkpoints(const std::string& run_dir, int64_t keep) {
  std::error_code ec;
  const auto files = checkpoints_in(run_dir);
  for (size_t i = 0; keep > 0 && i + static_cast<size_t>(keep) < files.size(); ++i)
    fs::remove_all(files[i], ec);
}

Result<checkpoint::Checkpoint> read_checkpoint(const std::string& path) {
  if (is_sharded_checkpoint(path)) return read_sharded_checkpoint(path);
  if (hub::is_hf_model_dir(path)) return hub::read_hf_weights(path);
  return checkpoint::read_safetensors(path);
}

std::optional<std::string> latest_checkpoint(const std::string& run_dir) {
  const auto files = checkpoints_in(run_dir);
  if (files.empty()) return std::nullopt;
  return files.back().string();
}

}  // namespace tandem::host::train
