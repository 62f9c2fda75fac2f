// What the SDK's backend-kit tests share: an op description that owns
// every array it points into, an attribute, and the status and message a
// call throws.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tandem/backend_kit.hpp"

namespace {

// One op description and every array it points into.
struct Desc {
  std::string op;
  std::vector<std::vector<int64_t>> in_dims, out_dims;
  std::vector<tdm_dtype> in_types, out_types;
  std::vector<tdm_attr> attrs;
  const char* node = nullptr;
  uint32_t version = 1;
  std::vector<tdm_tensor_desc> ins, outs;
  tdm_op_desc d{};

  const tdm_op_desc& get() {
    auto fill = [](std::vector<tdm_tensor_desc>& v, const std::vector<std::vector<int64_t>>& dims,
                   const std::vector<tdm_dtype>& types) {
      v.clear();
      for (size_t i = 0; i < dims.size(); ++i) {
        tdm_tensor_desc t{};
        t.struct_size = sizeof t;
        t.dtype = types[i];
        t.rank = uint32_t(dims[i].size());
        t.dims = dims[i].empty() ? nullptr : dims[i].data();
        v.push_back(t);
      }
    };
    fill(ins, in_dims, in_types);
    fill(outs, out_dims, out_types);
    d = tdm_op_desc{};
    d.struct_size = sizeof d;
    d.op = op.c_str();
    d.op_version = version;
    d.attrs = attrs.empty() ? nullptr : attrs.data();
    d.n_attrs = attrs.size();
    d.inputs = ins.data();
    d.n_inputs = ins.size();
    d.outputs = outs.data();
    d.n_outputs = outs.size();
    d.node_name = node;
    return d;
  }
};

// An attribute of `type` named `name`; the caller sets its value.
tdm_attr attr(const char* name, tdm_attr_type type) {
  tdm_attr a{};
  a.struct_size = sizeof a;
  a.name = name;
  a.type = type;
  return a;
}

// The status and message a throwing call ends with, as tandem.hpp reports them.
struct Thrown {
  tdm_status status = TDM_OK;
  std::string message;
};
template <class F>
Thrown thrown(F&& f) {
  try {
    f();
  } catch (const tandem::Error& e) {
    return {e.status(), e.what()};
  }
  return {};
}

}  // namespace
