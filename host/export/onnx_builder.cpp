#include "export/onnx_builder.hpp"

#include <cstring>

#include "tandem/half.hpp"

namespace tandem::host::exporting {

int32_t onnx_type(tdm_dtype dtype) {
  switch (dtype) {
    case TDM_F32:
      return onnx::TensorProto::FLOAT;
    case TDM_F64:
      return onnx::TensorProto::DOUBLE;
    case TDM_F16:
      return onnx::TensorProto::FLOAT16;
    case TDM_BF16:
      return onnx::TensorProto::BFLOAT16;
    case TDM_S8:
      return onnx::TensorProto::INT8;
    case TDM_U8:
      return onnx::TensorProto::UINT8;
    case TDM_S32:
      return onnx::TensorProto::INT32;
    case TDM_S64:
      return onnx::TensorProto::INT64;
    default:
      return 0;
  }
}

OnnxBuilder::OnnxBuilder(onnx::GraphProto& out, const Graph& graph,
                         std::map<ValueId, std::vector<bool>> batch_dims)
    : out_(out), graph_(graph), batch_dims_(std::move(batch_dims)) {}

std::string OnnxBuilder::name(ValueId id) {
  if (auto it = names_.find(id); it != names_.end()) return it->second;
  std::string wanted = graph_.value(id)->name;
  std::string unique = wanted;
  for (int k = 2; used_.count(unique) > 0; ++k) unique = wanted + "_" + std::to_string(k);
  used_.insert(unique);
  return names_[id] = unique;
}

std::vector<int64_t> OnnxBuilder::reshape_target(ValueId id) const {
  std::vector<int64_t> dims = graph_.value(id)->type.dims;
  auto batch = batch_dims_.find(id);
  for (size_t i = 0; batch != batch_dims_.end() && i < dims.size() && i < batch->second.size(); ++i)
    if (batch->second[i]) dims[i] = -1;
  return dims;
}

void OnnxBuilder::describe(ValueId id, onnx::TypeProto& type) const {
  const Value& v = *graph_.value(id);
  onnx::TypeProto_Tensor& tensor = *type.mutable_tensor_type();
  tensor.set_elem_type(onnx_type(v.type.dtype));
  onnx::TensorShapeProto& shape = *tensor.mutable_shape();
  const std::vector<int64_t> dims = reshape_target(id);
  for (int64_t d : dims) {
    onnx::TensorShapeProto_Dimension& dim = *shape.add_dim();
    if (d < 0)
      dim.set_dim_param("batch");
    else
      dim.set_dim_value(d);
  }
}

std::string OnnxBuilder::fresh(const std::string& hint) {
  std::string n;
  do n = hint + "/" + std::to_string(counter_++);
  while (used_.count(n) > 0);
  used_.insert(n);
  return n;
}

std::string OnnxBuilder::bytes(const std::string& hint, int32_t onnx_dtype, const void* data, size_t size,
                               std::vector<int64_t> dims) {
  const std::string n = fresh(hint);
  onnx::TensorProto& t = *out_.add_initializer();
  t.set_name(n);
  t.set_data_type(onnx_dtype);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(static_cast<const char*>(data), size));
  return n;
}

std::string OnnxBuilder::ints(const std::string& hint, const std::vector<int64_t>& values,
                              std::vector<int64_t> dims) {
  return bytes(hint, onnx::TensorProto::INT64, values.data(), values.size() * sizeof(int64_t),
               std::move(dims));
}

std::string OnnxBuilder::floats(const std::string& hint, const std::vector<float>& values,
                                std::vector<int64_t> dims) {
  return bytes(hint, onnx::TensorProto::FLOAT, values.data(), values.size() * sizeof(float), std::move(dims));
}

std::string OnnxBuilder::scalar(const std::string& hint, tdm_dtype dtype, double value) {
  switch (dtype) {
    case TDM_F64:
      return bytes(hint, onnx::TensorProto::DOUBLE, &value, sizeof value, {});
    case TDM_F16: {
      const uint16_t bits = f64_to_f16(value);
      return bytes(hint, onnx::TensorProto::FLOAT16, &bits, sizeof bits, {});
    }
    case TDM_BF16: {
      const uint16_t bits = f64_to_bf16(value);
      return bytes(hint, onnx::TensorProto::BFLOAT16, &bits, sizeof bits, {});
    }
    default: {
      const float f = static_cast<float>(value);
      return bytes(hint, onnx::TensorProto::FLOAT, &f, sizeof f, {});
    }
  }
}

onnx::NodeProto& OnnxBuilder::node(const std::string& op_type, const std::vector<std::string>& inputs,
                                   const std::vector<std::string>& outputs, const std::string& name) {
  onnx::NodeProto& n = *out_.add_node();
  n.set_op_type(op_type);
  n.set_name(fresh(name));
  for (const std::string& i : inputs) n.add_input(i);
  for (const std::string& o : outputs) n.add_output(o);
  return n;
}

void set_ints(onnx::NodeProto& node, const std::string& name, const std::vector<int64_t>& values) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a.add_ints(v);
}

void set_int(onnx::NodeProto& node, const std::string& name, int64_t value) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
}

void set_float(onnx::NodeProto& node, const std::string& name, float value) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(value);
}

}  // namespace tandem::host::exporting
