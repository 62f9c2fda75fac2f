// CUDA backend — one convolution (forward, data gradient or filter
// gradient) as a cuDNN graph (backend API): an operation graph of one
// convolution node, the engine configurations cuDNN's heuristic proposes,
// and the execution plan of the one the rule of math/conv_algorithm.hpp
// takes. cuDNN 9 deprecates the legacy cudnnConvolution* calls this
// replaces (ops/conv2d.cpp keeps them behind cuda.conv_api=legacy).
//
// Built at prepare, so the plan's workspace is planned memory and no launch
// builds anything on the GPU; a launch only binds the three tensors and the
// workspace to the plan (a variant pack) and executes it on its stream's
// handle. From cuDNN 9.8 the plan is built for the device's properties, not
// a handle, so any handle of the device runs it; before 9.8 the graph and
// the plan take the prepare-time handle, as those versions require.
#ifndef TANDEM_CUDA_OPS_CONV_GRAPH_HPP
#define TANDEM_CUDA_OPS_CONV_GRAPH_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "math/conv_algorithm.hpp"
#include "vendor/cudnn.hpp"

namespace tandem::cuda {

enum class ConvDirection { Forward, GradInput, GradWeight };

// The convolution whatever the direction: x [N, C, H, W], w [K, C/groups,
// R, S], y [N, K, P, Q] (groups follow from C and w's second dimension).
struct ConvGraphShape {
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  int64_t x[4] = {}, w[4] = {}, y[4] = {};
  int64_t stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1};
};

// The GPU a plan is built for: the device of a cuDNN handle (the plugin's
// prepare-time handle), or, from cuDNN 9.8, device properties as cuDNN
// reads them from JSON (CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION), which
// need no GPU at all: cuDNN's ahead-of-time build, with which the tests
// build and check plans for an H100 on a machine without one.
struct ConvGraphDevice {
  cudnnHandle_t handle = nullptr;
  std::string properties_json;  // used when not empty
};

// What a cuDNN graph call answered, for the caller's error.
struct ConvGraphError {
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  std::string what;
};

class ConvGraphPlan {
 public:
  struct Built;
  ~ConvGraphPlan();

  // The plan the rule takes, or null with `why_none` (no engine fits the
  // options: a decline) or with `error` set (cuDNN refused the graph
  // itself, or properties JSON before cuDNN 9.8).
  static std::unique_ptr<ConvGraphPlan> build(const ConvGraphDevice& device, ConvDirection direction,
                                              const ConvGraphShape& shape, bool tf32,
                                              const math::ConvAlgorithmOptions& options,
                                              std::string& why_none, ConvGraphError& error);

  size_t workspace() const noexcept { return workspace_; }
  int64_t engine() const noexcept { return engine_; }
  bool deterministic() const noexcept { return deterministic_; }

  // Runs the plan on `handle`'s stream: x, w, y are the three tensors by
  // role (the gradient is y for Forward, x for GradInput, w for
  // GradWeight); workspace holds workspace() bytes. The cuDNN status.
  cudnnStatus_t run(cudnnHandle_t handle, void* x, void* w, void* y, void* workspace) const;

 private:
  explicit ConvGraphPlan(std::unique_ptr<Built> built) noexcept;
  std::unique_ptr<Built> built_;
  size_t workspace_ = 0;
  int64_t engine_ = -1;
  bool deterministic_ = false;
};

}  // namespace tandem::cuda

#endif  // TANDEM_CUDA_OPS_CONV_GRAPH_HPP
