#include "program/executor_run.hpp"

#include <cstring>
#include <filesystem>
#include <set>

#include "checkpoint/safetensors.hpp"
#include "exec/tensor_text.hpp"
#include "ops/shapes.hpp"

namespace tandem::host::program {
namespace {

template <class T>
double load(const unsigned char* bytes) {
  T v;
  std::memcpy(&v, bytes, sizeof v);
  return static_cast<double>(v);
}

template <class T>
void store(unsigned char* bytes, double value) {
  const T v = static_cast<T>(value);
  std::memcpy(bytes, &v, sizeof v);
}

}  // namespace

Result<const Value*> ExecutorRun::scalar(const std::string& name) const {
  const Value* v = model_.graph.value_by_name(name);
  if (v == nullptr) return make_error("no value named '" + name + "' in the training graph", TDM_NOT_FOUND);
  if (ops::numel(v->type.dims) != 1)
    return make_error("value '" + name + "' is " + ops::dims_str(v->type.dims) + ", not a scalar",
                      TDM_INVALID_ARGUMENT);
  switch (v->type.dtype) {
    case TDM_F32:
    case TDM_F64:
    case TDM_S32:
    case TDM_S64:
    case TDM_U8:
      return v;
    default:
      return make_error("value '" + name + "' has a dtype scalars cannot carry", TDM_INVALID_ARGUMENT);
  }
}

Result<double> ExecutorRun::get(const std::string& name) {
  auto v = scalar(name);
  if (!v) return v.error();
  unsigned char bytes[8] = {};
  const size_t size = (*v)->type.dtype == TDM_F64 || (*v)->type.dtype == TDM_S64 ? 8
                      : (*v)->type.dtype == TDM_U8                               ? 1
                                                                                 : 4;
  if (auto r = executor_.read((*v)->id, bytes, size); !r) return r.error();
  switch ((*v)->type.dtype) {
    case TDM_F32:
      return load<float>(bytes);
    case TDM_F64:
      return load<double>(bytes);
    case TDM_S32:
      return load<int32_t>(bytes);
    case TDM_S64:
      return load<int64_t>(bytes);
    default:
      return load<uint8_t>(bytes);
  }
}

Result<void> ExecutorRun::set(const std::string& name, double value) {
  auto v = scalar(name);
  if (!v) return v.error();
  unsigned char bytes[8] = {};
  size_t size = 4;
  switch ((*v)->type.dtype) {
    case TDM_F32:
      store<float>(bytes, value);
      break;
    case TDM_F64:
      store<double>(bytes, value), size = 8;
      break;
    case TDM_S32:
      store<int32_t>(bytes, value);
      break;
    case TDM_S64:
      store<int64_t>(bytes, value), size = 8;
      break;
    default:
      store<uint8_t>(bytes, value), size = 1;
      break;
  }
  return executor_.write((*v)->id, bytes, size);
}

Result<const Value*> ExecutorRun::persistent(const std::string& name) const {
  const Value* v = model_.graph.value_by_name(name);
  if (v == nullptr) return make_error("no value named '" + name + "' in the training graph", TDM_NOT_FOUND);
  if (v->kind != TDM_VALUE_PARAMETER && v->kind != TDM_VALUE_STATE)
    return make_error("'" + name +
                          "' is not a parameter or state value: between steps only they hold contents (an "
                          "activation or gradient lives within its step)",
                      TDM_NOT_FOUND);
  return v;
}

Result<TensorType> ExecutorRun::tensor_type(const std::string& name) {
  auto v = persistent(name);
  if (!v) return v.error();
  return (*v)->type;
}

Result<const Value*> ExecutorRun::persistent(const std::string& name, size_t bytes) const {
  auto v = persistent(name);
  if (!v) return v;
  if (const size_t size = exec::tensor_bytes((*v)->type); bytes != size)
    return make_error("'" + name + "' is " + ops::dims_str((*v)->type.dims) + " " +
                          exec::dtype_name((*v)->type.dtype) + ", " + std::to_string(size) + " bytes, not " +
                          std::to_string(bytes),
                      TDM_INVALID_ARGUMENT);
  return v;
}

Result<void> ExecutorRun::read_tensor(const std::string& name, void* out, size_t bytes) {
  auto v = persistent(name, bytes);
  if (!v) return v.error();
  return executor_.read((*v)->id, out, bytes);
}

Result<void> ExecutorRun::write_tensor(const std::string& name, const void* in, size_t bytes) {
  auto v = persistent(name, bytes);
  if (!v) return v.error();
  return executor_.write((*v)->id, in, bytes);
}

Result<std::string> ExecutorRun::save_tensors(const std::string& file_name,
                                              const std::vector<SavedTensor>& tensors,
                                              const std::string& plugin) {
  if (run_dir_.empty())
    return make_error(
        "this command keeps no run directory: " + file_name + " is written by tandem train only",
        TDM_UNSUPPORTED);
  const std::filesystem::path name(file_name);
  if (file_name.empty() || name.filename() != name || file_name[0] == '.' ||
      name.extension() != ".safetensors")
    return make_error("'" + file_name +
                          "' is not a file name for the run directory: give a plain name ending in "
                          "\".safetensors\", without a directory part",
                      TDM_INVALID_ARGUMENT);
  if (tensors.empty()) return make_error(file_name + ": no tensors to write", TDM_INVALID_ARGUMENT);
  // Read under the values' names, which the gathering of slices and
  // shards knows them by; named as the file asks once whole.
  checkpoint::Checkpoint file;
  file.metadata = {{"tandem.written_by", plugin + " (feature plugin)"},
                   {"tandem.after_step", std::to_string(step_)}};
  std::set<std::string> names;
  std::vector<const Value*> sources;
  for (const SavedTensor& t : tensors) {
    if (!names.insert(t.name).second)
      return make_error(file_name + ": the tensor name '" + t.name + "' is given twice",
                        TDM_INVALID_ARGUMENT);
    auto v = persistent(t.value);
    if (!v) return v.error();
    sources.push_back(*v);
    file.tensors.push_back({t.value, (*v)->type.dtype, (*v)->type.dims, {}});
  }
  // Every rank checks the request alike; those whose tensors are written
  // or gathered read them.
  if (writes_ || (make_whole_ && takes_part_))
    for (size_t i = 0; i < sources.size(); ++i) {
      std::vector<std::byte>& data = file.tensors[i].data;
      data.resize(exec::tensor_bytes(sources[i]->type));
      if (auto r = executor_.read(sources[i]->id, data.data(), data.size()); !r) return r.error();
    }
  if (make_whole_)
    if (auto r = make_whole_(file); !r) return r.error();
  if (!writes_) return std::string();
  for (size_t i = 0; i < tensors.size(); ++i) file.tensors[i].name = tensors[i].name;
  const std::string path = (std::filesystem::path(run_dir_) / name).string();
  if (auto r = checkpoint::write_safetensors(path, file); !r) return r.error();
  return path;
}

}  // namespace tandem::host::program
