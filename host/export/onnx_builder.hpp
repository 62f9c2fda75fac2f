// Writing one ONNX graph from Tandem's evaluation graph: names, constants and
// nodes, and what each Tandem value is in ONNX (its name, and its dims with
// the batch dimension symbolic).
//
// The batch dimension is found, not assumed: the exporter lowers the model at
// two batch sizes, and a dim that differs between them is the batch (ONNX
// "batch"; -1 in a Reshape target). Every other dim is fixed, as in Tandem.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "util/result.hpp"

namespace tandem::host::exporting {

// ONNX's element type of a Tandem dtype (0 for one ONNX lacks).
int32_t onnx_type(tdm_dtype dtype);

class OnnxBuilder {
 public:
  // `graph`: the evaluation graph at one batch size; `batch_dims`: per
  // value, which of its dims are the batch (from the second lowering).
  OnnxBuilder(onnx::GraphProto& out, const Graph& graph, std::map<ValueId, std::vector<bool>> batch_dims);

  const Graph& graph() const noexcept { return graph_; }
  // The ONNX name of a Tandem value (its graph name, made unique).
  std::string name(ValueId id);
  // A value's dims with each batch dim as -1 (a Reshape target).
  std::vector<int64_t> reshape_target(ValueId id) const;
  // Fills `type` with the value's element type and dims ("batch" symbolic).
  void describe(ValueId id, onnx::TypeProto& type) const;

  // A name for an intermediate tensor of node `hint`.
  std::string fresh(const std::string& hint);
  // Constant tensors (initializers), returning their names.
  std::string ints(const std::string& hint, const std::vector<int64_t>& values, std::vector<int64_t> dims);
  std::string floats(const std::string& hint, const std::vector<float>& values, std::vector<int64_t> dims);
  // A scalar of `dtype` (f32, f64, f16 or bf16) holding `value`.
  std::string scalar(const std::string& hint, tdm_dtype dtype, double value);
  std::string bytes(const std::string& hint, int32_t onnx_dtype, const void* data, size_t size,
                    std::vector<int64_t> dims);

  // Appends a node; returns it for attributes.
  onnx::NodeProto& node(const std::string& op_type, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name);

 private:
  onnx::GraphProto& out_;
  const Graph& graph_;
  std::map<ValueId, std::vector<bool>> batch_dims_;
  std::map<ValueId, std::string> names_;
  std::set<std::string> used_;
  int counter_ = 0;
};

// Attribute helpers for a node under construction.
void set_ints(onnx::NodeProto& node, const std::string& name, const std::vector<int64_t>& values);
void set_int(onnx::NodeProto& node, const std::string& name, int64_t value);
void set_float(onnx::NodeProto& node, const std::string& name, float value);

}  // namespace tandem::host::exporting
