// CUDA backend — a convolution as a cuDNN graph (conv_graph.hpp).
#include "ops/conv_graph.hpp"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace tandem::cuda {

namespace {

// The tensors' ids in the graph and in every launch's variant pack.
constexpr int64_t kX = 'x', kW = 'w', kY = 'y';
// Every tensor a kernel gets starts at least 64 bytes aligned (the planner's
// arena offsets, the allocator's blocks): 16 lets cuDNN use its vector loads.
constexpr int64_t kAlignment = 16;
// cuDNN from which a plan is built for a device's properties, not a handle
// (the handle attributes of graphs and plans are deprecated there).
constexpr size_t kDevicePropertiesVersion = 90800;

// A cuDNN call that failed while building: thrown inside build, returned as
// its ConvGraphError.
struct Failed {
  cudnnStatus_t status;
  const char* what;
};

void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS) throw Failed{status, what};
}

// A backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  Descriptor() = default;
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    check(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  Descriptor(Descriptor&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Descriptor& operator=(Descriptor&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  ~Descriptor() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
  }
  cudnnBackendDescriptor_t get() const noexcept { return d_; }

  Descriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                  const void* values, const char* what) {
    check(cudnnBackendSetAttribute(d_, name, type, count, values), what);
    return *this;
  }
  Descriptor& set(cudnnBackendAttributeName_t name, const Descriptor& value, const char* what) {
    cudnnBackendDescriptor_t raw = value.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw, what);
  }
  Descriptor& set(cudnnBackendAttributeName_t name, int64_t value, const char* what) {
    return set(name, CUDNN_TYPE_INT64, 1, &value, what);
  }
  Descriptor& finalize(const char* what) {
    check(cudnnBackendFinalize(d_), what);
    return *this;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

Descriptor tensor(const int64_t (&dims)[4], int64_t uid, cudnnDataType_t dtype) {
  const int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};  // NCHW, dense
  Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dtype, "tensor data type")
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, "tensor dimensions")
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, "tensor strides")
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid, "tensor id")
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, kAlignment, "tensor alignment")
      .finalize("a tensor descriptor");
  return t;
}

Descriptor convolution(const ConvGraphShape& s) {
  // f32 accumulation whatever the data (f16/bf16 included), as the README promises.
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  Descriptor c(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  c.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, "convolution compute type")
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, "convolution mode")
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, int64_t{2}, "convolution spatial dims")
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, s.dilation, "convolution dilations")
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, s.stride, "convolution strides")
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, s.padding, "convolution paddings")
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, s.padding, "convolution paddings")
      .finalize("the convolution descriptor");
  return c;
}

// The one node of the graph. Its attributes by direction: x, w, y are the
// forward's X, W, Y; the data gradient's DX, W, DY; the filter gradient's
// X, DW, DY.
Descriptor operation(ConvDirection direction, const Descriptor& x, const Descriptor& w, const Descriptor& y,
                     const Descriptor& conv) {
  struct Names {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  };
  const Names n = direction == ConvDirection::Forward
                      ? Names{CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA}
                  : direction == ConvDirection::GradInput
                      ? Names{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA}
                      : Names{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
  const float alpha = 1.f, beta = 0.f;  // overwrite the output
  Descriptor op(n.type);
  op.set(n.x, x, "convolution x")
      .set(n.w, w, "convolution w")
      .set(n.y, y, "convolution y")
      .set(n.conv, conv, "convolution descriptor")
      .set(n.alpha, CUDNN_TYPE_FLOAT, 1, &alpha, "convolution alpha")
      .set(n.beta, CUDNN_TYPE_FLOAT, 1, &beta, "convolution beta")
      .finalize("the convolution operation");
  return op;
}

// The engine configurations the heuristic proposes, best first: mode A's,
// then the fallback list's (engines that take any shape).
std::vector<Descriptor> engine_configs(const Descriptor& graph, const Descriptor* device) {
  std::vector<Descriptor> configs;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Descriptor heuristic(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heuristic.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "heuristic graph")
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristic mode");
    if (device != nullptr) heuristic.set(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, *device, "heuristic device");
    heuristic.finalize("the engine heuristic");
    int64_t count = 0;
    check(cudnnBackendGetAttribute(heuristic.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
          "the heuristic's result count");
    std::vector<Descriptor> found;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      found.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(found.back().get());
    }
    int64_t got = 0;
    check(cudnnBackendGetAttribute(heuristic.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
          "the heuristic's results");
    for (int64_t i = 0; i < got && i < count; ++i) configs.push_back(std::move(found[size_t(i)]));
  }
  return configs;
}

// An engine's global index and what its numerical notes say.
struct EngineFacts {
  int64_t index = -1;
  math::EngineNumerics numerics;
};

EngineFacts facts_of(const Descriptor& config) {
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t n = 0;
  check(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &n, &raw),
        "an engine configuration's engine");
  EngineFacts f;
  check(cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &f.index),
        "an engine's index");
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t count = 0;
  check(cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes),
        "an engine's numerical notes");
  for (int64_t i = 0; i < count && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; ++i) {
    switch (notes[i]) {
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
        f.numerics.tensor_core = true;
        break;
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
        f.numerics.down_converts_inputs = true;
        break;
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
        f.numerics.reduced_precision_reduction = true;
        break;
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
        f.numerics.nondeterministic = true;
        break;
      default:
        break;
    }
  }
  return f;
}

}  // namespace

// What the plan keeps alive: cuDNN's descriptors refer to one another.
struct ConvGraphPlan::Built {
  Descriptor device, x, w, y, conv, op, graph, config, plan;
  // The last launch's variant pack and the addresses it binds (x, w, y,
  // workspace); launches on several streams share it.
  std::mutex pack_mutex;
  Descriptor pack;
  void* bound[4] = {};
};

namespace {

// The device's properties as cuDNN 9.8 and later take them: from the
// handle, or from the JSON a test gives for a device it does not have.
Descriptor device_properties(const ConvGraphDevice& device, cudnnHandle_t& handle) {
  Descriptor d(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR);
  const std::string& json = device.properties_json;
  if (json.empty())
    d.set(CUDNN_ATTR_DEVICEPROP_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "device properties");
  else
    d.set(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, int64_t(json.size()), json.data(),
          "device properties");
  d.finalize("the device properties");
  return d;
}

// The heuristic's engine configurations whose numerics the dtype and the
// TF32 setting allow, with what each is.
void allowed_configs(Descriptor& graph, Descriptor* device, bool f32, bool tf32,
                     std::vector<Descriptor>& allowed, std::vector<EngineFacts>& facts) {
  for (Descriptor& config : engine_configs(graph, device)) {
    const EngineFacts f = facts_of(config);
    if (!math::engine_numerics_allowed(f.numerics, f32, tf32)) continue;
    allowed.push_back(std::move(config));
    facts.push_back(f);
  }
}

}  // namespace

ConvGraphPlan::ConvGraphPlan(std::unique_ptr<Built> built) noexcept : built_(std::move(built)) {}
ConvGraphPlan::~ConvGraphPlan() = default;

std::unique_ptr<ConvGraphPlan> ConvGraphPlan::build(const ConvGraphDevice& device, ConvDirection direction,
                                                    const ConvGraphShape& shape, bool tf32,
                                                    const math::ConvAlgorithmOptions& options,
                                                    std::string& why_none, ConvGraphError& error) {
  try {
    auto b = std::make_unique<Built>();
    const bool by_properties = cudnnGetVersion() >= kDevicePropertiesVersion;
    if (!by_properties && !device.properties_json.empty())
      throw Failed{CUDNN_STATUS_NOT_SUPPORTED, "device properties from JSON (cuDNN 9.8 or later)"};
    cudnnHandle_t prepare = device.handle;
    // The graph first: from 9.8 nothing up to its finalize needs the GPU, so
    // the installed cuDNN checks it on any machine (tests/cuda/test_vendor_libraries.cpp).
    b->x = tensor(shape.x, kX, shape.dtype);
    b->w = tensor(shape.w, kW, shape.dtype);
    b->y = tensor(shape.y, kY, shape.dtype);
    b->conv = convolution(shape);
    b->op = operation(direction, b->x, b->w, b->y, b->conv);
    b->graph = Descriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    b->graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, b->op, "graph operations");
    if (!by_properties)
      b->graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &prepare, "graph handle");
    b->graph.finalize("the operation graph");
    if (by_properties) b->device = device_properties(device, prepare);
    // The configurations whose numerics keep the plugin's promise, as
    // candidates of the rule; their plans are finalized in the rule's order
    // until one fits.
    std::vector<Descriptor> allowed;
    std::vector<EngineFacts> facts;
    allowed_configs(b->graph, by_properties ? &b->device : nullptr, shape.dtype == CUDNN_DATA_FLOAT, tf32,
                    allowed, facts);
    std::vector<math::ConvAlgorithmCandidate> candidates(allowed.size());
    std::vector<bool> deterministic(allowed.size()), tried(allowed.size());
    std::vector<Descriptor> plans(allowed.size());
    for (size_t i = 0; i < allowed.size(); ++i) {
      deterministic[i] = !facts[i].numerics.nondeterministic;
      candidates[i].algo = int(facts[i].index);
      candidates[i].deterministic = deterministic[i];
    }
    const auto try_plan = [&](size_t i) {
      tried[i] = true;
      Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, allowed[i], "plan engine configuration");
      if (by_properties)
        plan.set(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, b->device, "plan device");
      else
        plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &prepare, "plan handle");
      // An engine the heuristic proposed may still not take this shape:
      // then it is not usable, not an error.
      int64_t bytes = 0, n = 0;
      if (cudnnBackendFinalize(plan.get()) != CUDNN_STATUS_SUCCESS ||
          cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                   &n, &bytes) != CUDNN_STATUS_SUCCESS ||
          bytes < 0)
        return;
      candidates[i].usable = true;
      candidates[i].workspace = size_t(bytes);
      plans[i] = std::move(plan);
    };
    for (const size_t i : math::conv_candidate_order(deterministic, options.determinism)) {
      try_plan(i);
      if (!candidates[i].usable || candidates[i].workspace > options.workspace_limit) continue;
      b->config = std::move(allowed[i]);
      b->plan = std::move(plans[i]);
      std::unique_ptr<ConvGraphPlan> p(new ConvGraphPlan(std::move(b)));
      p->workspace_ = candidates[i].workspace;
      p->engine_ = facts[i].index;
      p->deterministic_ = deterministic[i];
      return p;
    }
    // None fits: the rule's reason, from every candidate's answer.
    for (size_t i = 0; i < allowed.size(); ++i)
      if (!tried[i]) try_plan(i);
    why_none = math::pick_conv_algorithm(candidates, options).why_none;
    if (why_none.empty()) why_none = "cuDNN's graph API has no engine for this convolution";
    return nullptr;
  } catch (const Failed& f) {
    error = {f.status, f.what};
    return nullptr;
  }
}

cudnnStatus_t ConvGraphPlan::run(cudnnHandle_t handle, void* x, void* w, void* y, void* workspace) const {
  Built& b = *built_;
  // The executor's tensors and workspace keep their addresses from step to
  // step: the variant pack is made once per set of them, not per launch.
  void* const bound[4] = {x, w, y, workspace};
  std::lock_guard<std::mutex> lock(b.pack_mutex);
  if (b.pack.get() == nullptr || !std::equal(bound, bound + 4, b.bound)) {
    try {
      const int64_t ids[3] = {kX, kW, kY};
      Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, ids, "variant pack ids")
          .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, bound, "variant pack pointers")
          .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &bound[3], "variant pack workspace")
          .finalize("the variant pack");
      b.pack = std::move(pack);
      std::copy(bound, bound + 4, b.bound);
    } catch (const Failed& f) {
      b.pack = Descriptor();
      return f.status;
    }
  }
  return cudnnBackendExecute(handle, b.plan.get(), b.pack.get());
}

}  // namespace tandem::cuda
