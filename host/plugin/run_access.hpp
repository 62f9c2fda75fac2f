// A running training step as feature step hooks reach it (tdm_run*): its
// scalars (tdm_host_api.run_scalar_get/set, run_ranks_max) and, at step
// boundaries, its whole persistent tensors (run_tensor_desc/read/write,
// run_save_tensors; ABI 1.12). The executor's run object implements it; the
// tdm_run* handed to plugins points at it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.hpp"

#include "tandem/host_api.h"
#include "util/result.hpp"

namespace tandem::host {

class RunAccess {
 public:
  virtual ~RunAccess() = default;
  // TDM_NOT_FOUND (as Error::status) for an unknown name.
  virtual Result<double> get(const std::string& name) = 0;
  virtual Result<void> set(const std::string& name, double value) = 0;
  // The maximum of `value` over the run's ranks (tdm_host_api.run_ranks_max);
  // a single process's is `value` itself.
  virtual Result<int32_t> max_over_ranks(int32_t value) { return value; }

  // Whole persistent values (parameters and state), as this rank holds them.
  // TDM_NOT_FOUND for an unknown name or an activation; `bytes` must be the
  // value's size.
  virtual Result<TensorType> tensor_type(const std::string& name) { return no_tensors(name); }
  virtual Result<void> read_tensor(const std::string& name, void* out, size_t bytes) {
    (void)out, (void)bytes;
    return no_tensors(name);
  }
  virtual Result<void> write_tensor(const std::string& name, const void* in, size_t bytes) {
    (void)in, (void)bytes;
    return no_tensors(name);
  }
  // {name in the file, run value} pairs written atomically into `file_name`
  // in the run directory by `plugin` (named in the file's metadata); returns
  // the path written, or "" on a rank that does not write.
  struct SavedTensor {
    std::string name, value;
  };
  virtual Result<std::string> save_tensors(const std::string& file_name,
                                           const std::vector<SavedTensor>& tensors,
                                           const std::string& plugin) {
    (void)tensors, (void)plugin;
    return make_error("this run keeps no files: cannot write " + file_name, TDM_UNSUPPORTED);
  }

  // `dims` kept for as long as the run lives, as tdm_host_api.run_tensor_desc
  // promises its out->dims.
  const std::vector<int64_t>& keep_dims(const std::string& name, const std::vector<int64_t>& dims) {
    return kept_dims_.emplace(name, dims).first->second;
  }

  tdm_run* as_c() noexcept { return reinterpret_cast<tdm_run*>(this); }
  static RunAccess* from_c(tdm_run* run) noexcept { return reinterpret_cast<RunAccess*>(run); }

 private:
  std::map<std::string, std::vector<int64_t>> kept_dims_;
  static Error no_tensors(const std::string& name) {
    return make_error("this run gives no access to tensors: cannot reach '" + name + "'", TDM_UNSUPPORTED);
  }
};

// Map-backed scalars and tensors: known names only (set and write create
// nothing new), for the host-services tests.
class MapRunAccess final : public RunAccess {
 public:
  void define(const std::string& name, double value) { values_[name] = value; }
  void define_tensor(const std::string& name, TensorType type, std::vector<unsigned char> bytes) {
    tensors_[name] = {std::move(type), std::move(bytes)};
  }
  const std::vector<unsigned char>& tensor(const std::string& name) { return tensors_.at(name).second; }

  Result<TensorType> tensor_type(const std::string& name) override {
    auto t = find(name);
    if (!t) return t.error();
    return (*t)->first;
  }
  Result<void> read_tensor(const std::string& name, void* out, size_t bytes) override {
    auto t = find(name, bytes);
    if (!t) return t.error();
    std::copy((*t)->second.begin(), (*t)->second.end(), static_cast<unsigned char*>(out));
    return {};
  }
  Result<void> write_tensor(const std::string& name, const void* in, size_t bytes) override {
    auto t = find(name, bytes);
    if (!t) return t.error();
    const auto* from = static_cast<const unsigned char*>(in);
    std::copy(from, from + bytes, (*t)->second.begin());
    return {};
  }

  Result<double> get(const std::string& name) override {
    auto it = values_.find(name);
    if (it == values_.end()) return make_error("no run scalar named '" + name + "'", TDM_NOT_FOUND);
    return it->second;
  }
  Result<void> set(const std::string& name, double value) override {
    auto it = values_.find(name);
    if (it == values_.end()) return make_error("no run scalar named '" + name + "'", TDM_NOT_FOUND);
    it->second = value;
    return {};
  }

 private:
  using Tensor = std::pair<TensorType, std::vector<unsigned char>>;
  Result<Tensor*> find(const std::string& name, std::optional<size_t> bytes = std::nullopt) {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) return make_error("no tensor named '" + name + "'", TDM_NOT_FOUND);
    if (bytes && *bytes != it->second.second.size())
      return make_error("'" + name + "' has " + std::to_string(it->second.second.size()) + " bytes, not " +
                            std::to_string(*bytes),
                        TDM_INVALID_ARGUMENT);
    return &it->second;
  }
  std::map<std::string, double> values_;
  std::map<std::string, Tensor> tensors_;
};

}  // namespace tandem::host
