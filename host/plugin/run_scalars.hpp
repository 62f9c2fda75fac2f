// Scalars of a running step, as feature step hooks read and write them
// through tdm_host_api.run_scalar_get/set. The executor's run object will
// implement RunScalars; the tdm_run* handed to plugins points at it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "tandem/host_api.h"
#include "util/result.hpp"

namespace tandem::host {

class RunScalars {
 public:
  virtual ~RunScalars() = default;
  // TDM_NOT_FOUND (as Error::status) for an unknown name.
  virtual Result<double> get(const std::string& name) = 0;
  virtual Result<void> set(const std::string& name, double value) = 0;
  // The maximum of `value` over the run's ranks (tdm_host_api.run_ranks_max);
  // a single process's is `value` itself.
  virtual Result<int32_t> max_over_ranks(int32_t value) { return value; }

  tdm_run* as_c() noexcept { return reinterpret_cast<tdm_run*>(this); }
  static RunScalars* from_c(tdm_run* run) noexcept { return reinterpret_cast<RunScalars*>(run); }
};

// Map-backed scalars: known names only (set creates nothing new), for tests
// and for the executor until it provides device-backed values.
class MapRunScalars final : public RunScalars {
 public:
  void define(const std::string& name, double value) { values_[name] = value; }

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
  std::map<std::string, double> values_;
};

}  // namespace tandem::host
