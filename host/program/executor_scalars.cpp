#include "program/executor_scalars.hpp"

#include <cstring>

#include "ops/shapes.hpp"

namespace tandem::host::program {
namespace {

template <class T>
double load(const unsigned char* bytes) {
  T v;
  std::memcpy(&v, bytes, sizeof v);
  return static_cast<double>(v);
}

template <class T>
void store(unsigned char* bytes, double value) {
  const T v = static_cast<T>(value);
  std::memcpy(bytes, &v, sizeof v);
}

}  // namespace

Result<const Value*> ExecutorScalars::scalar(const std::string& name) const {
  const Value* v = graph_.value_by_name(name);
  if (v == nullptr) return make_error("no value named '" + name + "' in the training graph", TDM_NOT_FOUND);
  if (ops::numel(v->type.dims) != 1)
    return make_error("value '" + name + "' is " + ops::dims_str(v->type.dims) + ", not a scalar",
                      TDM_INVALID_ARGUMENT);
  switch (v->type.dtype) {
    case TDM_F32:
    case TDM_F64:
    case TDM_S32:
    case TDM_S64:
    case TDM_U8:
      return v;
    default:
      return make_error("value '" + name + "' has a dtype scalars cannot carry", TDM_INVALID_ARGUMENT);
  }
}

Result<double> ExecutorScalars::get(const std::string& name) {
  auto v = scalar(name);
  if (!v) return v.error();
  unsigned char bytes[8] = {};
  const size_t size = (*v)->type.dtype == TDM_F64 || (*v)->type.dtype == TDM_S64 ? 8
                      : (*v)->type.dtype == TDM_U8                               ? 1
                                                                                 : 4;
  if (auto r = executor_.read((*v)->id, bytes, size); !r) return r.error();
  switch ((*v)->type.dtype) {
    case TDM_F32:
      return load<float>(bytes);
    case TDM_F64:
      return load<double>(bytes);
    case TDM_S32:
      return load<int32_t>(bytes);
    case TDM_S64:
      return load<int64_t>(bytes);
    default:
      return load<uint8_t>(bytes);
  }
}

Result<void> ExecutorScalars::set(const std::string& name, double value) {
  auto v = scalar(name);
  if (!v) return v.error();
  unsigned char bytes[8] = {};
  size_t size = 4;
  switch ((*v)->type.dtype) {
    case TDM_F32:
      store<float>(bytes, value);
      break;
    case TDM_F64:
      store<double>(bytes, value), size = 8;
      break;
    case TDM_S32:
      store<int32_t>(bytes, value);
      break;
    case TDM_S64:
      store<int64_t>(bytes, value), size = 8;
      break;
    default:
      store<uint8_t>(bytes, value), size = 1;
      break;
  }
  return executor_.write((*v)->id, bytes, size);
}

}  // namespace tandem::host::program
