// A stand-in for cuDNN's graph (backend) API, loaded by
// tests/cuda/test_conv_graph.cpp in place of libcudnn: descriptors keep what
// was set on them, the heuristic answers the engines a test describes,
// execution plans take their engine's workspace or refuse, and every
// finalize and execute is logged. It checks what real cuDNN requires of the
// calls plugins/cuda/ops/conv_graph.cpp makes (attributes by type and count,
// finalized inputs, a handle or device properties by version), so the
// plugin's graph code runs on a machine without a GPU; whether cuDNN
// computes the right convolution is the GPU tests' part.
#include <cudnn.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

struct Attribute {
  cudnnBackendAttributeType_t type;
  int64_t count;
  std::vector<unsigned char> bytes;
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
};

struct Desc {
  cudnnBackendDescriptorType_t type;
  std::map<cudnnBackendAttributeName_t, Attribute> attributes;
  bool finalized = false;
  int engine = -1;  // engine configurations and engines: which of the test's engines
  bool has(cudnnBackendAttributeName_t name) const { return attributes.count(name) != 0; }
  const Desc* descriptor(cudnnBackendAttributeName_t name) const {
    auto it = attributes.find(name);
    return it == attributes.end() ? nullptr : *it->second.as<const Desc*>();
  }
};

// What a test describes (fake_cudnn_reset) and what it reads back.
struct Engine {
  int64_t index;
  std::vector<cudnnBackendNumericalNote_t> notes;
  int64_t workspace;  // < 0: its plan does not finalize
  bool fallback;      // in the fallback heuristic's list, not mode A's
};
struct State {
  size_t version = 91900;
  std::vector<Engine> engines;
  // Finalizing a descriptor of this type fails (pointwise: the convolution has none, nothing fails).
  cudnnBackendDescriptorType_t refuse = CUDNN_BACKEND_POINTWISE_DESCRIPTOR;
  std::set<Desc*> live;
  std::string log;
};
State& state() {
  static State s;
  return s;
}

void note(const std::string& line) {
  state().log += line + "\n";
}

bool live(cudnnBackendDescriptor_t d) {
  return state().live.count(static_cast<Desc*>(d)) != 0;
}

size_t type_size(cudnnBackendAttributeType_t t) {
  switch (t) {
    case CUDNN_TYPE_HANDLE:
      return sizeof(cudnnHandle_t);
    case CUDNN_TYPE_DATA_TYPE:
      return sizeof(cudnnDataType_t);
    case CUDNN_TYPE_INT64:
      return sizeof(int64_t);
    case CUDNN_TYPE_FLOAT:
      return sizeof(float);
    case CUDNN_TYPE_VOID_PTR:
      return sizeof(void*);
    case CUDNN_TYPE_CONVOLUTION_MODE:
      return sizeof(cudnnConvolutionMode_t);
    case CUDNN_TYPE_HEUR_MODE:
      return sizeof(cudnnBackendHeurMode_t);
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
      return sizeof(cudnnBackendDescriptor_t);
    default:
      return 0;
  }
}

// The attributes a descriptor must have before it finalizes.
bool complete(const Desc& d) {
  const auto all = [&](std::initializer_list<cudnnBackendAttributeName_t> names) {
    for (auto n : names)
      if (!d.has(n)) return false;
    return true;
  };
  const bool by_properties = state().version >= 90800;
  switch (d.type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
      return all({CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_ATTR_TENSOR_STRIDES,
                  CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT});
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
      return all({CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_ATTR_CONVOLUTION_CONV_MODE,
                  CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_ATTR_CONVOLUTION_DILATIONS,
                  CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS,
                  CUDNN_ATTR_CONVOLUTION_POST_PADDINGS});
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
      return all(
          {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
           CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
           CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA});
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
      return all(
          {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA});
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
      return all({CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA});
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
      return d.has(CUDNN_ATTR_OPERATIONGRAPH_OPS) &&
             (by_properties || d.has(CUDNN_ATTR_OPERATIONGRAPH_HANDLE));
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
      return all({CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_ATTR_ENGINEHEUR_MODE}) &&
             (!by_properties || d.has(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP));
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
      return d.has(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG) &&
             d.has(by_properties ? CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP : CUDNN_ATTR_EXECUTION_PLAN_HANDLE);
    case CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR:
      return d.has(CUDNN_ATTR_DEVICEPROP_HANDLE);
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
      return all({CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                  CUDNN_ATTR_VARIANT_PACK_WORKSPACE});
    default:
      return true;
  }
}

std::string join(const Attribute& a) {
  std::string out;
  for (int64_t i = 0; i < a.count; ++i) {
    if (i > 0) out += ",";
    if (a.type == CUDNN_TYPE_INT64) out += std::to_string(a.as<int64_t>()[i]);
    if (a.type == CUDNN_TYPE_FLOAT) out += std::to_string(int(a.as<float>()[i]));
    if (a.type == CUDNN_TYPE_DATA_TYPE) out += std::to_string(int(a.as<cudnnDataType_t>()[i]));
    if (a.type == CUDNN_TYPE_CONVOLUTION_MODE) out += std::to_string(int(a.as<cudnnConvolutionMode_t>()[i]));
  }
  return out;
}

// "name=value ..." of a descriptor's attributes, by the attribute's number;
// a tensor as its id's letter, [dims/strides] and data type.
std::string describe(const Desc& d) {
  std::string out;
  for (const auto& [name, a] : d.attributes) {
    out += " " + std::to_string(int(name)) + "=";
    if (a.type != CUDNN_TYPE_BACKEND_DESCRIPTOR) {
      out += join(a);
      continue;
    }
    const Desc& t = **a.as<const Desc*>();
    if (t.type != CUDNN_BACKEND_TENSOR_DESCRIPTOR) {
      out += "descriptor";
      continue;
    }
    out += std::string(1, char(*t.attributes.at(CUDNN_ATTR_TENSOR_UNIQUE_ID).as<int64_t>())) + "[" +
           join(t.attributes.at(CUDNN_ATTR_TENSOR_DIMENSIONS)) + "/" +
           join(t.attributes.at(CUDNN_ATTR_TENSOR_STRIDES)) + "] type " +
           join(t.attributes.at(CUDNN_ATTR_TENSOR_DATA_TYPE)) + " align " +
           join(t.attributes.at(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT));
  }
  return out;
}

}  // namespace

extern "C" {

// ---- the test's side ---------------------------------------------------------

// Forgets everything and describes the engines the heuristic will answer:
// `count` entries of (index, workspace or -1, notes bit mask by
// cudnnBackendNumericalNote_t, 1 when in the fallback list only).
__attribute__((visibility("default"))) void fake_cudnn_reset(size_t version, const int64_t* engines,
                                                             int count, int refuse_type) {
  State& s = state();
  s.version = version;
  s.engines.clear();
  s.log.clear();
  s.refuse = cudnnBackendDescriptorType_t(refuse_type);
  for (int i = 0; i < count; ++i) {
    const int64_t* e = engines + 4 * i;
    Engine engine{e[0], {}, e[1], e[3] != 0};
    for (int n = 0; n < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; ++n)
      if ((e[2] >> n) & 1) engine.notes.push_back(cudnnBackendNumericalNote_t(n));
    s.engines.push_back(engine);
  }
}

__attribute__((visibility("default"))) const char* fake_cudnn_log() {
  return state().log.c_str();
}

__attribute__((visibility("default"))) size_t fake_cudnn_live_descriptors() {
  return state().live.size();
}

// ---- cuDNN's functions ------------------------------------------------------

size_t cudnnGetVersion(void) {
  return state().version;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t* out) {
  auto* d = new Desc{type, {}, false, -1};
  state().live.insert(d);
  *out = d;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t d) {
  if (!live(d)) return CUDNN_STATUS_BAD_PARAM;
  state().live.erase(static_cast<Desc*>(d));
  delete static_cast<Desc*>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count, const void* values) {
  if (!live(descriptor) || values == nullptr || count < 1 || type_size(type) == 0)
    return CUDNN_STATUS_BAD_PARAM;
  Desc& d = *static_cast<Desc*>(descriptor);
  if (d.finalized) return CUDNN_STATUS_NOT_SUPPORTED;
  const bool by_properties = state().version >= 90800;
  if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
    for (int64_t i = 0; i < count; ++i) {
      auto* v = static_cast<Desc* const*>(values)[i];
      if (!live(v) || !v->finalized)
        return CUDNN_STATUS_BAD_PARAM;  // only finalized descriptors are attributes
    }
  if (name == CUDNN_ATTR_OPERATIONGRAPH_HANDLE || name == CUDNN_ATTR_EXECUTION_PLAN_HANDLE)
    note(std::string("handle on ") + (name == CUDNN_ATTR_OPERATIONGRAPH_HANDLE ? "graph" : "plan"));
  if ((name == CUDNN_ATTR_ENGINEHEUR_DEVICEPROP || name == CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP) &&
      !by_properties)
    return CUDNN_STATUS_BAD_PARAM;  // before 9.8 these attributes do not exist
  const auto* bytes = static_cast<const unsigned char*>(values);
  d.attributes[name] = {type, count,
                        std::vector<unsigned char>(bytes, bytes + size_t(count) * type_size(type))};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
  if (!live(descriptor)) return CUDNN_STATUS_BAD_PARAM;
  Desc& d = *static_cast<Desc*>(descriptor);
  if (d.type == state().refuse || !complete(d)) return CUDNN_STATUS_NOT_SUPPORTED;
  if (d.type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) {
    const Desc* config = d.descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
    const Engine& e = state().engines.at(size_t(config->engine));
    note("plan engine " + std::to_string(e.index));
    if (e.workspace < 0) return CUDNN_STATUS_NOT_SUPPORTED;
    d.engine = config->engine;
  }
  if (d.type == CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR) note("convolution" + describe(d));
  if (d.type == CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR) note("variant pack");
  if (d.type == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR ||
      d.type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR ||
      d.type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR)
    note("operation" + describe(d));
  if (d.type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR) {
    const Desc* op = d.descriptor(CUDNN_ATTR_OPERATIONGRAPH_OPS);
    note("graph of operation type " + std::to_string(int(op->type)));
  }
  d.finalized = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                       cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                                       int64_t requested, int64_t* count, void* values) {
  if (!live(descriptor)) return CUDNN_STATUS_BAD_PARAM;
  const Desc& d = *static_cast<Desc*>(descriptor);
  if (!d.finalized) return CUDNN_STATUS_NOT_INITIALIZED;
  State& s = state();
  if (name == CUDNN_ATTR_ENGINEHEUR_RESULTS && type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    const bool fallback =
        *d.attributes.at(CUDNN_ATTR_ENGINEHEUR_MODE).as<cudnnBackendHeurMode_t>() == CUDNN_HEUR_MODE_FALLBACK;
    std::vector<int> answer;
    for (size_t i = 0; i < s.engines.size(); ++i)
      if (s.engines[i].fallback == fallback) answer.push_back(int(i));
    *count = int64_t(answer.size());
    for (int64_t i = 0; i < requested && i < *count; ++i) {
      auto* config = static_cast<Desc**>(values)[i];
      if (!live(config) || config->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR) return CUDNN_STATUS_BAD_PARAM;
      config->engine = answer[size_t(i)];
      config->finalized = true;
    }
    return CUDNN_STATUS_SUCCESS;
  }
  if (name == CUDNN_ATTR_ENGINECFG_ENGINE && type == CUDNN_TYPE_BACKEND_DESCRIPTOR && requested == 1) {
    auto* engine = static_cast<Desc**>(values)[0];
    if (!live(engine) || engine->type != CUDNN_BACKEND_ENGINE_DESCRIPTOR) return CUDNN_STATUS_BAD_PARAM;
    engine->engine = d.engine;
    engine->finalized = true;
    *count = 1;
    return CUDNN_STATUS_SUCCESS;
  }
  if (d.engine < 0) return CUDNN_STATUS_BAD_PARAM;
  const Engine& e = s.engines.at(size_t(d.engine));
  if (name == CUDNN_ATTR_ENGINE_GLOBAL_INDEX && type == CUDNN_TYPE_INT64 && requested >= 1) {
    *static_cast<int64_t*>(values) = e.index;
    *count = 1;
    return CUDNN_STATUS_SUCCESS;
  }
  if (name == CUDNN_ATTR_ENGINE_NUMERICAL_NOTE && type == CUDNN_TYPE_NUMERICAL_NOTE) {
    *count = int64_t(e.notes.size());
    for (int64_t i = 0; i < requested && i < *count; ++i)
      static_cast<cudnnBackendNumericalNote_t*>(values)[i] = e.notes[size_t(i)];
    return CUDNN_STATUS_SUCCESS;
  }
  if (name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE && type == CUDNN_TYPE_INT64 && requested >= 1) {
    *static_cast<int64_t*>(values) = e.workspace;
    *count = 1;
    return CUDNN_STATUS_SUCCESS;
  }
  return CUDNN_STATUS_NOT_SUPPORTED;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                  cudnnBackendDescriptor_t pack) {
  if (!live(plan) || !live(pack)) return CUDNN_STATUS_BAD_PARAM;
  const Desc& p = *static_cast<Desc*>(plan);
  const Desc& v = *static_cast<Desc*>(pack);
  if (!p.finalized || !v.finalized || p.type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
    return CUDNN_STATUS_BAD_PARAM;
  const Attribute& ids = v.attributes.at(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
  const Attribute& pointers = v.attributes.at(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  if (ids.count != pointers.count) return CUDNN_STATUS_BAD_PARAM;
  std::string line = "execute engine " + std::to_string(state().engines.at(size_t(p.engine)).index) +
                     " handle " + std::to_string(reinterpret_cast<uintptr_t>(handle));
  for (int64_t i = 0; i < ids.count; ++i)
    line += " " + std::string(1, char(ids.as<int64_t>()[i])) + "=" +
            std::to_string(reinterpret_cast<uintptr_t>(pointers.as<void*>()[i]));
  line += " ws=" + std::to_string(reinterpret_cast<uintptr_t>(
                       *v.attributes.at(CUDNN_ATTR_VARIANT_PACK_WORKSPACE).as<void*>()));
  note(line);
  return CUDNN_STATUS_SUCCESS;
}

}  // extern "C"
