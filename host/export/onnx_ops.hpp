// Each catalog op of an evaluation graph as ONNX nodes (opset 17). One
// converter per op, grouped by family like the catalog's sections:
// onnx_dense_ops.cpp (linear, matmul, conv2d, pooling, their INT8 forms as
// QDQ), onnx_tensor_ops.cpp (activations, elementwise, softmax, norms,
// reductions, shapes, embedding, quantize), onnx_transformer_ops.cpp
// (rms_norm, rope, attention). A converter writes the node's outputs under
// their Tandem names (OnnxBuilder::name) so the next node finds them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "export/onnx_builder.hpp"
#include "export/onnx_coverage.hpp"

namespace tandem::host::exporting {

using Converter = Result<void> (*)(OnnxBuilder& b, const Node& node);
using ConverterTable = std::map<std::string, Converter, std::less<>>;

void add_dense_converters(ConverterTable& table);
void add_tensor_converters(ConverterTable& table);
void add_transformer_converters(ConverterTable& table);

// Every converter, by catalog op name.
const ConverterTable& converters();

// An error for what ONNX (or this exporter) cannot express, naming the node.
Error not_exportable(const Node& node, const std::string& why);

// A float attribute given as one number or a list (quantization scales),
// as a list; empty when absent.
std::vector<double> floats_attr(const Node& node, const std::string& name);

// Appends `activation` ("none", "relu", "tanh", "sigmoid") to `from`, into
// `to`; "none" is an Identity.
Result<void> activation(OnnxBuilder& b, const Node& node, const std::string& kind, const std::string& from,
                        const std::string& to);

}  // namespace tandem::host::exporting
