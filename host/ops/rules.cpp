#include "ops/rules.hpp"

#include "tandem/tandem.hpp"

namespace tandem::host::ops::rules {

Error bad(const std::string& what) {
  return make_error(what, TDM_INVALID_ARGUMENT);
}

std::string str(const TensorType& t) {
  return std::string(tandem::dtype_name(t.dtype)) + dims_str(t.dims);
}

bool present(const ShapeQuery& q, size_t i) {
  return i < q.inputs.size() && q.inputs[i].has_value();
}

Result<TensorType> input(const ShapeQuery& q, size_t i, const char* name) {
  if (!present(q, i)) return bad(std::string("input ") + std::to_string(i) + " (" + name + ") is missing");
  return *q.inputs[i];
}

Result<TensorType> declared(const ShapeQuery& q, size_t j, const char* what) {
  if (j >= q.declared.size())
    return bad(std::string("output ") + std::to_string(j) + " must be given: it carries the " + what);
  return q.declared[j];
}

int64_t int_attr(const ShapeQuery& q, const char* name, int64_t fallback) {
  return ops::int_attr(*q.attrs, name, fallback);
}

std::string string_attr(const ShapeQuery& q, const char* name, const std::string& fallback) {
  return ops::string_attr(*q.attrs, name, fallback);
}

std::vector<int64_t> ints_attr(const ShapeQuery& q, const char* name, std::vector<int64_t> fallback) {
  return ops::ints_attr(*q.attrs, name, std::move(fallback));
}

std::vector<int64_t> pair_attr(const ShapeQuery& q, const char* name, std::vector<int64_t> fallback) {
  std::vector<int64_t> v = ints_attr(q, name, std::move(fallback));
  if (v.size() == 1) v.push_back(v[0]);
  return v;
}

Result<size_t> axis(int64_t axis, size_t rank, const char* what) {
  const int64_t r = static_cast<int64_t>(rank);
  const int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r)
    return bad(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
               std::to_string(rank));
  return static_cast<size_t>(a);
}

Outputs same_as(const ShapeQuery& q, size_t i, const char* name) {
  auto x = input(q, i, name);
  if (!x) return x.error();
  return std::vector<TensorType>{*x};
}

Result<void> addend_like(const ShapeQuery& q, size_t i, const TensorType& dx) {
  if (present(q, i) && (q.inputs[i]->dtype != dx.dtype || q.inputs[i]->dims != dx.dims))
    return bad("addend " + str(*q.inputs[i]) + " must be dx's " + str(dx));
  return {};
}

bool is_floating(tdm_dtype dtype) {
  return dtype == TDM_F32 || dtype == TDM_F64 || dtype == TDM_F16 || dtype == TDM_BF16;
}

tdm_dtype product_output_dtype(const ShapeQuery& q, size_t j, tdm_dtype operands) {
  const bool low = operands == TDM_BF16 || operands == TDM_F16;
  return low && j < q.declared.size() && q.declared[j].dtype == TDM_F32 ? TDM_F32 : operands;
}

}  // namespace tandem::host::ops::rules
