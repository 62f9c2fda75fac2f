// Measured costs for automatic placement: how long each
// op takes on each device, and how fast bytes move between two devices.
//
// Nothing is guessed from FLOP counts: an op is timed on the device the
// first time it is asked for (a short calibration: one warm-up launch, then
// launches until about a millisecond has passed, the median kept), and the
// figures are cached on disk per machine, backend plugin version and build
// (a fingerprint of the plugin file's bytes, checked by its size and
// modification time first), device and thread setting, so later runs and
// `tandem plan` start at once, and a rebuilt plugin is measured anew even
// when its version did not change. The cache is
// a JSON file per device under $TANDEM_CACHE_DIR (default
// $XDG_CACHE_HOME/tandem, else ~/.cache/tandem)/costs/, written atomically;
// a file that cannot be read is recalibrated, never trusted half-way.
//
// An op the backend declines (kernel_prepare answers TDM_UNSUPPORTED) is
// remembered as unsupported with the backend's reason, so placement never
// puts it there.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device/device.hpp"
#include "exec/kernel_binding.hpp"
#include "util/result.hpp"

namespace tandem::host::place {

// The cost cache's name for host memory as a copy's other end.
inline constexpr const char* kHostMemory = "host";

struct OpCost {
  bool supported = true;
  double micros = 0;     // median time of one launch
  size_t workspace = 0;  // the kernel's scratch bytes (plain layouts)
  std::string why;       // unsupported: the backend's reason
  // Not measured: the device could not hold the op's operands (then it
  // cannot run it either, for now); not cached, measured again next time.
  bool no_memory = false;
};

// time(bytes) = latency + bytes / bandwidth, fitted from two measured sizes.
struct CopyCost {
  double latency_us = 0;
  double bytes_per_us = 0;
  double micros(size_t bytes) const {
    return latency_us + (bytes_per_us > 0 ? static_cast<double>(bytes) / bytes_per_us : 0);
  }
};

struct CostModelOptions {
  std::string cache_dir;  // empty: $TANDEM_CACHE_DIR, $XDG_CACHE_HOME/tandem or ~/.cache/tandem
  // What else changes timings on this machine, e.g. "threads=2" (part of the key).
  std::string context;
  // false: measure every op again (`--recalibrate`, after a driver or
  // hardware change the cache key cannot see), then write the files anew.
  bool read_cache = true;
};

class CostModel {
 public:
  // `devices`: every device a placement may use, by id; they must outlive the model.
  CostModel(std::map<std::string, const DeviceHandle*> devices, CostModelOptions options);
  ~CostModel();
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // The cost of `spec` on `device` (calibrated on first use). An Error only
  // when the measurement itself failed (a launch error, no memory).
  Result<OpCost> op(const std::string& device, const exec::OpSpec& spec);
  // Moving `bytes` from one device to the other (calibrated on first use).
  Result<double> copy_micros(const std::string& from, const std::string& to, size_t bytes);
  // One copy of `bytes` between `device` and host memory, either way: what a
  // streamed value's fetch or write home costs (cached among the device's
  // copies as kHostMemory).
  Result<double> host_link_micros(const std::string& device, size_t bytes);
  // Writes what was measured since loading (atomically). Errors name the file.
  Result<void> save();
  // The cache file of `device`.
  std::string cache_file(const std::string& device) const;
  // `id` (a pipeline stage's name, place/stage_cut.hpp) costs what
  // `device`, a device of the model, does: measured and cached once, as it.
  void measure_as(const std::string& id, const std::string& device);
  // Ops calibrated (not read from a cache) since creation.
  size_t calibrated() const noexcept { return calibrated_; }

 private:
  struct DeviceCosts;
  Result<DeviceCosts*> costs_of(const std::string& device);
  const std::string& measured_as(const std::string& id) const;

  std::map<std::string, const DeviceHandle*> devices_;
  CostModelOptions options_;
  std::map<std::string, std::unique_ptr<DeviceCosts>> loaded_;
  std::map<std::string, std::string> aliases_;  // measure_as
  size_t calibrated_ = 0;
};

// The key an op is cached under: op, attributes, input and output types.
std::string op_cost_key(const exec::OpSpec& spec);

}  // namespace tandem::host::place
