#include "ops/rules.hpp"

#include "tandem/tandem.hpp"

namespace tandem::host::ops::rules {

Error bad(const std::string& what) {
  return make_error(what, TDM_INVALID_ARGUMENT);
}

std::string str(const TensorType& t) {
  return std::string(tandem::dtype_name(t.dtype)) + dims_str(t.dims);
}

Result<TensorType> input(const ShapeQuery& q, size_t i, const char* name) {
  if (i >= q.inputs.size() || !q.inputs[i].has_value())
    return bad(std::string("input ") + std::to_string(i) + " (" + name + ") is missing");
  return *q.inputs[i];
}

Result<TensorType> declared(const ShapeQuery& q, size_t j, const char* what) {
  if (j >= q.declared.size())
    return bad(std::string("output ") + std::to_string(j) + " must be given: it carries the " + what);
  return q.declared[j];
}

Outputs same_as(const ShapeQuery& q, size_t i, const char* name) {
  auto x = input(q, i, name);
  if (!x) return x.error();
  return std::vector<TensorType>{*x};
}

}  // namespace tandem::host::ops::rules
