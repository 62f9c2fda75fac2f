// Reference backend — shared validation and element access.
#include "common.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "../half.hpp"

namespace tandem::reference {

bool is_floating(tdm_dtype d) {
  return d == TDM_F32 || d == TDM_F64 || d == TDM_F16 || d == TDM_BF16;
}

int64_t broadcast_source(int64_t out_flat, const Dims& out, const Dims& in) {
  int64_t source = 0, in_stride = 1;
  for (size_t k = 0; k < out.size(); ++k) {  // from the last dim
    const int64_t d = out[out.size() - 1 - k];
    const int64_t coord = out_flat % d;
    out_flat /= d;
    if (k < in.size()) {
      const int64_t din = in[in.size() - 1 - k];
      if (din != 1) source += coord * in_stride;
      in_stride *= din;
    }
  }
  return source;
}

// ---------------------------------------------------------------------------
// Check
// ---------------------------------------------------------------------------
std::string Check::where() const {
  std::string s = "op '" + op_.op() + "'";
  const std::string node = op_.node_name();
  if (!node.empty()) s += " (node '" + node + "')";
  return s;
}

void Check::fail(const std::string& what) const {
  throw Error(TDM_INVALID_ARGUMENT, where() + ": " + what);
}
void Check::unsupported(const std::string& why) const {
  throw Unsupported("reference: " + where() + ": " + why);
}

std::string Check::tensor_name(bool input, size_t index) const {
  return (input ? "input " : "output ") + std::to_string(index);
}

void Check::counts(size_t min_in, size_t max_in, size_t min_out, size_t max_out) const {
  const size_t ni = op_.inputs().size(), no = op_.outputs().size();
  auto range = [](size_t lo, size_t hi) {
    return lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
  };
  if (ni < min_in || ni > max_in)
    fail("expected " + range(min_in, max_in) + " inputs, got " + std::to_string(ni));
  if (no < min_out || no > max_out)
    fail("expected " + range(min_out, max_out) + " outputs, got " + std::to_string(no));
}

bool Check::has_input(size_t i) const {
  return i < op_.inputs().size() && op_.inputs()[i].dtype != TDM_DTYPE_INVALID;
}
bool Check::has_output(size_t j) const {
  return j < op_.outputs().size() && op_.outputs()[j].dtype != TDM_DTYPE_INVALID;
}

static bool contains(const std::vector<tdm_dtype>& set, tdm_dtype d) {
  for (tdm_dtype x : set)
    if (x == d) return true;
  return false;
}

static std::string set_str(const std::vector<tdm_dtype>& set) {
  std::string s;
  for (size_t i = 0; i < set.size(); ++i) {
    if (i > 0) s += "/";
    s += dtype_name(set[i]);
  }
  return s;
}

tdm_dtype Check::primary_dtype(size_t i, const std::vector<tdm_dtype>& allowed) const {
  if (!has_input(i)) fail(tensor_name(true, i) + " is required");
  if (!contains(allowed, in(i).dtype))
    unsupported("dtype " + std::string(dtype_name(in(i).dtype)) + " of input " + std::to_string(i) +
                " is not implemented (supported: " + set_str(allowed) + ")");
  return in(i).dtype;
}

tdm_dtype Check::primary_output_dtype(size_t j, const std::vector<tdm_dtype>& allowed) const {
  if (!has_output(j)) fail(tensor_name(false, j) + " is required");
  if (!contains(allowed, out(j).dtype))
    unsupported("dtype " + std::string(dtype_name(out(j).dtype)) + " of output " + std::to_string(j) +
                " is not implemented (supported: " + set_str(allowed) + ")");
  return out(j).dtype;
}

void Check::input_dtype(size_t i, const std::vector<tdm_dtype>& allowed) const {
  if (!has_input(i)) fail(tensor_name(true, i) + " is required");
  if (!contains(allowed, in(i).dtype))
    fail(tensor_name(true, i) + ": expected dtype " + set_str(allowed) + ", got " + dtype_name(in(i).dtype));
}

void Check::output_dtype(size_t j, const std::vector<tdm_dtype>& allowed) const {
  if (!has_output(j)) fail(tensor_name(false, j) + " is required");
  if (!contains(allowed, out(j).dtype))
    fail(tensor_name(false, j) + ": expected dtype " + set_str(allowed) + ", got " +
         dtype_name(out(j).dtype));
}

void Check::input_shape(size_t i, const Dims& expected) const {
  if (!has_input(i)) fail(tensor_name(true, i) + " is required");
  if (in(i).dims != expected)
    fail(tensor_name(true, i) + ": expected shape " + dims_str(expected) + ", got " + dims_str(in(i).dims));
}

void Check::output(size_t j, tdm_dtype dtype, const Dims& expected) const {
  if (!has_output(j)) fail(tensor_name(false, j) + " is required");
  const TensorShape want(dtype, expected);
  if (out(j).dtype != dtype || out(j).dims != expected)
    fail(tensor_name(false, j) + ": expected " + shape_str(want) + ", got " + shape_str(out(j)));
}

void Check::input_rank(size_t i, size_t rank) const {
  if (!has_input(i)) fail(tensor_name(true, i) + " is required");
  if (in(i).rank() != rank)
    fail(tensor_name(true, i) + ": expected rank " + std::to_string(rank) + ", got " + shape_str(in(i)));
}

void Check::input_rank_at_least(size_t i, size_t rank) const {
  if (!has_input(i)) fail(tensor_name(true, i) + " is required");
  if (in(i).rank() < rank)
    fail(tensor_name(true, i) + ": expected rank >= " + std::to_string(rank) + ", got " + shape_str(in(i)));
}

std::vector<int64_t> Check::pair_attr(const char* name, std::vector<int64_t> fallback) const {
  std::vector<int64_t> v = op_.ints_attr(name, std::move(fallback));
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2)
    fail("attribute '" + std::string(name) + "' must have 2 entries, got " + std::to_string(v.size()));
  return v;
}

size_t Check::axis(int64_t axis, size_t rank, const char* what) const {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
         std::to_string(rank));
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

// ---------------------------------------------------------------------------
// Element access
// ---------------------------------------------------------------------------
template <class S>
static S read(const void* data, int64_t i) {
  S v;
  std::memcpy(&v, static_cast<const char*>(data) + i * int64_t(sizeof(S)), sizeof(S));
  return v;
}
template <class S>
static void write(void* data, int64_t i, S v) {
  std::memcpy(static_cast<char*>(data) + i * int64_t(sizeof(S)), &v, sizeof(S));
}

double load_double(const void* data, tdm_dtype dtype, int64_t i) {
  switch (dtype) {
    case TDM_F32:
      return read<float>(data, i);
    case TDM_F64:
      return read<double>(data, i);
    case TDM_F16:
      return f16_to_double(read<uint16_t>(data, i));
    case TDM_BF16:
      return bf16_to_double(read<uint16_t>(data, i));
    default:
      return static_cast<double>(load_int(data, dtype, i));
  }
}

int64_t load_int(const void* data, tdm_dtype dtype, int64_t i) {
  switch (dtype) {
    case TDM_S8:
      return read<int8_t>(data, i);
    case TDM_U8:
      return read<uint8_t>(data, i);
    case TDM_S32:
      return read<int32_t>(data, i);
    case TDM_S64:
      return read<int64_t>(data, i);
    default:
      throw Error(TDM_INTERNAL, "reference: load_int on a floating dtype");
  }
}

template <class I>
static I saturate(int64_t v) {
  if (v < int64_t(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v > int64_t(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

void store_int(void* data, tdm_dtype dtype, int64_t i, int64_t v) {
  switch (dtype) {
    case TDM_S8:
      return write<int8_t>(data, i, saturate<int8_t>(v));
    case TDM_U8:
      return write<uint8_t>(data, i, saturate<uint8_t>(v));
    case TDM_S32:
      return write<int32_t>(data, i, saturate<int32_t>(v));
    case TDM_S64:
      return write<int64_t>(data, i, v);
    default:
      return store_double(data, dtype, i, static_cast<double>(v));
  }
}

// Float -> integer: nearest, ties to even; saturating; NaN -> 0.
static int64_t round_saturate(double v, tdm_dtype dtype) {
  if (std::isnan(v)) return 0;
  double r = std::floor(v);
  const double rest = v - r;
  if (rest > 0.5 || (rest == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  const double two63 = 9223372036854775808.0;  // 2^63, exact
  if (r >= two63) return std::numeric_limits<int64_t>::max();
  if (r < -two63) return std::numeric_limits<int64_t>::min();
  (void)dtype;  // narrower dtypes saturate in store_int
  return static_cast<int64_t>(r);
}

void store_double(void* data, tdm_dtype dtype, int64_t i, double v) {
  switch (dtype) {
    case TDM_F32:
      return write<float>(data, i, static_cast<float>(v));  // IEEE: nearest-even
    case TDM_F64:
      return write<double>(data, i, v);
    case TDM_F16:
      return write<uint16_t>(data, i, f16_from_double(v));
    case TDM_BF16:
      return write<uint16_t>(data, i, bf16_from_double(v));
    case TDM_S8:
    case TDM_U8:
    case TDM_S32:
    case TDM_S64:
      return store_int(data, dtype, i, round_saturate(v, dtype));
    default:
      throw Error(TDM_INTERNAL, "reference: store into an invalid dtype");
  }
}

std::vector<int64_t> load_indices(const void* data, tdm_dtype dtype, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = load_int(data, dtype, i);
  return v;
}

}  // namespace tandem::reference
