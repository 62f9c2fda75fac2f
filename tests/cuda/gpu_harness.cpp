// A minimal host for the CUDA plugin tests (see gpu_harness.hpp).
#include "gpu_harness.hpp"

#include <algorithm>
#include <cstdlib>

namespace cudatest {

namespace tc = tandem::conformance;

Tensor Tensor::f32(std::vector<int64_t> dims, const std::vector<float>& v) {
  Tensor t{TDM_F32, std::move(dims), std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}
Tensor Tensor::s32(std::vector<int64_t> dims, const std::vector<int32_t>& v) {
  Tensor t{TDM_S32, std::move(dims), std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}
Tensor Tensor::empty(tdm_dtype dtype, std::vector<int64_t> dims) {
  return Tensor{dtype, std::move(dims), {}};
}
Tensor Tensor::absent() {
  return Tensor{TDM_DTYPE_INVALID, {}, {}};
}
int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}
std::vector<float> Tensor::floats() const {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

std::string Plugin::last_error() {
  return tc::last_plugin_error();
}

Plugin* Plugin::load(std::string& why) {
  static Plugin* instance = nullptr;
  static std::string failure;
  static bool tried = false;
  if (!tried) {
    tried = true;
    // TANDEM_CUDA_PLUGIN overrides the build-tree path (a copied build).
    const char* env = std::getenv("TANDEM_CUDA_PLUGIN");
    const char* path = env != nullptr && *env != '\0' ? env : TANDEM_CUDA_PLUGIN_PATH;
    tc::Outcome outcome;
    auto kit = tc::PluginUnderTest::load(path, outcome);
    if (kit) {
      instance = new Plugin();
      instance->kit_ = std::move(kit);
    } else {
      failure = outcome.message;
    }
  }
  why = failure;
  return instance;
}

std::string Plugin::device_unavailable_reason() {
  if (opened_) return unavailable_;
  opened_ = true;
  const tc::Outcome outcome = kit_->open_device(0);
  if (!outcome.ok()) unavailable_ = "cuda plugin: " + outcome.message;
  return unavailable_;
}

tdm_status Plugin::run(const std::string& op, const std::vector<Attr>& attrs,
                       const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                       size_t* workspace_out) {
  tc::Attrs a;
  for (const Attr& x : attrs) {
    if (x.type == TDM_ATTR_INT) a.integer(x.name, x.i);
    if (x.type == TDM_ATTR_FLOAT) a.number(x.name, x.f);
    if (x.type == TDM_ATTR_STRING) a.string(x.name, x.s);
    if (x.type == TDM_ATTR_INTS) a.ints(x.name, x.ints);
  }
  std::vector<tc::HostTensor> in;
  for (const Tensor& t : inputs) {
    in.push_back(t.dtype == TDM_DTYPE_INVALID ? tc::HostTensor() : tc::HostTensor(t.dtype, t.dims));
    std::memcpy(in.back().data(), t.bytes.data(), std::min(in.back().size_bytes(), t.bytes.size()));
  }
  std::vector<tandem::TensorShape> out;
  for (const Tensor& t : outputs) out.emplace_back(t.dtype, t.dims);
  tc::RunOptions options;
  options.node_name.clear();
  const tc::RunResult r = tc::run_op(*kit_, op, a, in, out, options);
  if (workspace_out != nullptr) *workspace_out = r.workspace_bytes;
  implementation_ = r.implementation;
  for (size_t j = 0; j < r.outputs.size(); ++j)
    if (r.outputs[j].present())
      outputs[j].bytes.assign(r.outputs[j].data(), r.outputs[j].data() + r.outputs[j].size_bytes());
  return r.status;
}

}  // namespace cudatest
