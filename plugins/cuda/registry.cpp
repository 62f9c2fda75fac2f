// CUDA backend — the op registry and prepare-time validation helpers.
#include <map>

#include "cuda_common.hpp"

namespace tandem::cuda {

int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

std::string shape_str(tdm_dtype dtype, const Dims& d) {
  return std::string(dtype_name(dtype)) + dims_str(d);
}

std::string dims_str(const Dims& d) {
  std::string s = "[";
  // Appends piecewise: GCC 12 -O3 warns falsely (-Wrestrict) on "," + string.
  for (size_t i = 0; i < d.size(); ++i) {
    if (i != 0) s += ',';
    s += std::to_string(d[i]);
  }
  return s + "]";
}

Factory find_factory(const std::string& op) {
  static const std::map<std::string, Factory> table = [] {
    std::map<std::string, Factory> t;
    Registrar add = [&t](const char* name, Factory f) { t[name] = f; };
    register_blas(add);
    register_conv(add);
    register_pool(add);
    register_elementwise(add);
    register_activation(add);
    register_softmax(add);
    register_norm(add);
    register_embedding(add);
    register_reduce(add);
    register_layout(add);
    register_optim(add);
    return t;
  }();
  auto it = table.find(op);
  return it == table.end() ? nullptr : it->second;
}

std::string Check::where() const {
  std::string w = "op '" + op_.op() + "'";
  const std::string node = op_.node_name();
  if (!node.empty()) w += " (node '" + node + "')";
  return w;
}

void Check::fail(const std::string& what) const {
  throw Error(TDM_INVALID_ARGUMENT, "cuda plugin: " + where() + ": " + what);
}

void Check::unsupported(const std::string& why) const {
  throw Unsupported("cuda plugin: " + where() + ": " + why);
}

void Check::counts(size_t min_in, size_t max_in, size_t min_out, size_t max_out) const {
  const size_t ni = op_.inputs().size(), no = op_.outputs().size();
  if (ni < min_in || ni > max_in || no < min_out || no > max_out)
    fail("expects " + std::to_string(min_in) + ".." + std::to_string(max_in) + " inputs and " +
         std::to_string(min_out) + ".." + std::to_string(max_out) + " outputs, got " + std::to_string(ni) +
         " and " + std::to_string(no));
}

bool Check::has_input(size_t i) const {
  return i < op_.inputs().size() && op_.inputs()[i].dtype != TDM_DTYPE_INVALID;
}
bool Check::has_output(size_t j) const {
  return j < op_.outputs().size() && op_.outputs()[j].dtype != TDM_DTYPE_INVALID;
}

tdm_dtype Check::dtype(size_t i, const std::vector<tdm_dtype>& allowed) const {
  const tdm_dtype t = in(i).dtype;
  for (tdm_dtype a : allowed)
    if (a == t) return t;
  unsupported(std::string("dtype ") + dtype_name(t) + " is not implemented");
}

void Check::in_is(size_t i, tdm_dtype dtype, const Dims& dims) const {
  if (in(i).dtype != dtype || in(i).dims != dims)
    fail("input " + std::to_string(i) + " is " + shape_str(in(i).dtype, in(i).dims) + ", expected " +
         shape_str(dtype, dims));
}

void Check::out_is(size_t j, tdm_dtype dtype, const Dims& dims) const {
  if (out(j).dtype != dtype || out(j).dims != dims)
    fail("output " + std::to_string(j) + " is " + shape_str(out(j).dtype, out(j).dims) + ", expected " +
         shape_str(dtype, dims));
}

size_t Check::axis(int64_t axis, size_t rank) const {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

std::vector<int64_t> Check::pair(const char* name, std::vector<int64_t> fallback) const {
  std::vector<int64_t> v = op_.ints_attr(name, std::move(fallback));
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) fail(std::string("attribute '") + name + "' needs two values");
  return v;
}

}  // namespace tandem::cuda
