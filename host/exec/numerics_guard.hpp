// Debug checks around each kernel launch, for finding the node that goes
// wrong instead of a loss that ends up nan:
//   check   (--check-numerics): after a node runs, its floating outputs are
//           read back and the first element that is not finite is an error
//           naming the node, its layer, its backend and the value;
//   poison  (--poison-outputs): before a node runs, its floating outputs are
//           filled with NaN, so an output a kernel leaves unwritten shows up
//           (with check on, at that very node);
//   bounds  (--check-bounds): every value has kBoundsGuardBytes after it
//           (planner.hpp, Plan::guard_bytes); before a node runs the guards
//           after its outputs are filled with a pattern, after it they are
//           read back, and a changed byte is an error naming the node, its
//           backend, the value and how far past its end the kernel wrote.
// All synchronise after every node and copy every output: slow, for
// debugging. Outputs that share their buffer with an input (in-place ops)
// are never poisoned. Values in a backend's native layout are checked
// whole: their padding is zero.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "device/device.hpp"
#include "tandem/backend.h"
#include "util/result.hpp"

namespace tandem::host::exec {

struct NumericsOptions {
  bool check = false;
  bool check_backward = true;  // off under loss scaling, whose backward may overflow by design
  bool poison = false;
  bool bounds = false;
  bool any() const { return check || poison || bounds; }
};

// What --check-bounds keeps after each value: a multiple of the arena's
// alignment, and more than any vector store a kernel may overrun by.
inline constexpr size_t kBoundsGuardBytes = 256;

// One output of a node, as the guard sees it.
struct GuardedOutput {
  void* pointer = nullptr;
  size_t bytes = 0;   // the value's plain size (the numbers checked)
  size_t extent = 0;  // what the kernel may write: `bytes`, or a native value's padded size
  tdm_dtype dtype = TDM_F32;
  std::string value;      // the value's name, for messages
  bool in_place = false;  // the same buffer as one of the node's inputs
  size_t guard = 0;       // bytes after `extent` the kernel must leave alone (--check-bounds)
};

// The first element of `count` that is not finite: its index and value.
std::optional<std::pair<size_t, double>> first_non_finite(const void* data, size_t count, tdm_dtype dtype);
bool is_floating(tdm_dtype dtype);

class NumericsGuard {
 public:
  NumericsGuard(const DeviceHandle& device, NumericsOptions options) : device_(&device), options_(options) {}
  const NumericsOptions& options() const { return options_; }

  // Before a launch on `stream`: NaN into every floating output not shared
  // with an input; the pattern into every guard.
  Result<void> poison(tdm_stream* stream, const std::vector<GuardedOutput>& outputs);
  // After a launch: waits for `stream`, then an error naming `node` (its
  // description) when a guard changed, or an output holds a value that is
  // not finite.
  Result<void> check(tdm_stream* stream, const std::vector<GuardedOutput>& outputs, const std::string& node,
                     tdm_phase phase);

 private:
  Result<void> fill_guards(tdm_stream* stream, const std::vector<GuardedOutput>& outputs);
  Result<void> check_guards(tdm_stream* stream, const std::vector<GuardedOutput>& outputs,
                            const std::string& node);

  const DeviceHandle* device_;
  NumericsOptions options_;
  std::vector<unsigned char> host_;  // staging for reads and NaN fills
};

}  // namespace tandem::host::exec
