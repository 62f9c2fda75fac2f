// Tandem conformance kit — run one op on a plugin, host tensors in and out:
// the one single-op runner of the tree (the driver's cases, gradcheck, and
// the unit tests of each backend use it).
//
//   Attrs a; a.ints("stride", {2, 2}).integer("groups", 2);
//   RunResult r = run_op(plugin, "conv2d", a, {x, w, HostTensor()}, {y_shape});
//
// Prepares the kernel (TDM_UNSUPPORTED is an outcome, with the plugin's
// reason), allocates device buffers, copies the inputs in, allocates the
// workspace, poisons every output with 0xFF bytes (NaN in every float dtype)
// so an element the kernel never writes is caught, launches, copies the
// outputs back, synchronizes and frees everything.
#ifndef TANDEM_CONFORMANCE_RUN_OP_HPP
#define TANDEM_CONFORMANCE_RUN_OP_HPP

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tandem/conformance/host_tensor.hpp"
#include "tandem/conformance/outcome.hpp"
#include "tandem/conformance/plugin_under_test.hpp"

namespace tandem::conformance {

// Owned op attributes, turned into tdm_attr on demand.
class Attrs {
 public:
  Attrs& integer(const std::string& name, int64_t v);
  Attrs& number(const std::string& name, double v);
  Attrs& string(const std::string& name, const std::string& v);
  Attrs& ints(const std::string& name, std::vector<int64_t> v);
  Attrs& floats(const std::string& name, std::vector<double> v);
  // The value of an int or float attribute, or `fallback` when absent.
  double number_or(const std::string& name, double fallback) const;
  // The value of a string attribute, or `fallback` when absent.
  std::string string_or(const std::string& name, const std::string& fallback) const;
  std::vector<tdm_attr> view() const;  // valid while *this lives unchanged
  std::string str() const;             // "stride=2,2 groups=2"
  bool empty() const noexcept { return items_.empty(); }

 private:
  struct Item {
    std::string name;
    tdm_attr_type type = TDM_ATTR_INT;
    int64_t i = 0;
    double f = 0;
    std::string s;
    std::vector<int64_t> is;
    std::vector<double> fs;
  };
  std::vector<Item> items_;
};

struct RunOptions {
  // (output index, input index): the launch passes the input's buffer as
  // that output, as the catalog allows for in-place updates.
  std::vector<std::pair<size_t, size_t>> in_place;
  bool poison_outputs = true;
  // tdm_op_desc.node_name; empty: none (NULL).
  std::string node_name = "conformance";
  // tdm_op_desc.layouts (inputs then outputs, TDM_LAYOUT_*); empty: NULL,
  // all plain. A native tensor's bytes are the caller's to arrange.
  std::vector<uint8_t> layouts;
};

// Where a run stopped.
enum class RunStep { none, prepare, buffers, launch, readback };

struct RunResult {
  Outcome outcome;
  std::vector<HostTensor> outputs;  // filled when outcome.ok()
  std::string implementation;       // kernel_describe, when the plugin has it
  tdm_status status = TDM_OK;       // the status of the call that failed
  RunStep failed_at = RunStep::none;
  std::string plugin_message;  // what the plugin said (set_error) with that status
  size_t workspace_bytes = 0;  // what kernel_prepare asked for
};

// `inputs` may hold absent tensors (HostTensor()) for optional slots; an
// output shape with dtype TDM_DTYPE_INVALID is an absent optional output.
RunResult run_op(PluginUnderTest& plugin, const std::string& op, const Attrs& attrs,
                 const std::vector<HostTensor>& inputs, const std::vector<TensorShape>& outputs,
                 const RunOptions& options = {});

}  // namespace tandem::conformance

#endif
