// oneDNN backend — shared validation, engine and the primitive kernel.
#include "common.hpp"

namespace tandem::onednn {

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
  throw Error(TDM_INVALID_ARGUMENT, "onednn: " + where() + ": " + what);
}
void Check::unsupported(const std::string& why) const {
  throw Unsupported("onednn: " + where() + ": " + why);
}

void Check::counts(size_t min_in, size_t max_in, size_t min_out, size_t max_out) const {
  const size_t ni = op_.inputs().size(), no = op_.outputs().size();
  if (ni < min_in || ni > max_in)
    fail("expected " + std::to_string(min_in) + ".." + std::to_string(max_in) + " inputs, got " +
         std::to_string(ni));
  if (no < min_out || no > max_out)
    fail("expected " + std::to_string(min_out) + ".." + std::to_string(max_out) + " outputs, got " +
         std::to_string(no));
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
  for (size_t i = 0; i < set.size(); ++i) s += (i ? "/" : "") + std::string(dtype_name(set[i]));
  return s;
}

tdm_dtype Check::primary_dtype(size_t i, const std::vector<tdm_dtype>& allowed) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required");
  if (!contains(allowed, in(i).dtype))
    unsupported("dtype " + std::string(dtype_name(in(i).dtype)) + " of input " + std::to_string(i) +
                " is not implemented (supported: " + set_str(allowed) + ")");
  return in(i).dtype;
}
tdm_dtype Check::primary_output_dtype(size_t j, const std::vector<tdm_dtype>& allowed) const {
  if (!has_output(j)) fail("output " + std::to_string(j) + " is required");
  if (!contains(allowed, out(j).dtype))
    unsupported("dtype " + std::string(dtype_name(out(j).dtype)) + " of output " + std::to_string(j) +
                " is not implemented (supported: " + set_str(allowed) + ")");
  return out(j).dtype;
}
void Check::input_dtype(size_t i, const std::vector<tdm_dtype>& allowed) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required");
  if (!contains(allowed, in(i).dtype))
    fail("input " + std::to_string(i) + ": expected dtype " + set_str(allowed) + ", got " +
         dtype_name(in(i).dtype));
}
void Check::input_shape(size_t i, const Dims& expected) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required");
  if (in(i).dims != expected)
    fail("input " + std::to_string(i) + ": expected shape " + dims_str(expected) + ", got " +
         dims_str(in(i).dims));
}
void Check::input(size_t i, tdm_dtype dtype, const Dims& expected) const {
  input_dtype(i, {dtype});
  input_shape(i, expected);
}
void Check::output(size_t j, tdm_dtype dtype, const Dims& expected) const {
  if (!has_output(j)) fail("output " + std::to_string(j) + " is required");
  if (out(j).dtype != dtype || out(j).dims != expected)
    fail("output " + std::to_string(j) + ": expected " + shape_str(TensorShape(dtype, expected)) + ", got " +
         shape_str(out(j)));
}
void Check::input_rank_at_least(size_t i, size_t rank) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required");
  if (in(i).rank() < rank)
    fail("input " + std::to_string(i) + ": expected rank >= " + std::to_string(rank) + ", got " +
         shape_str(in(i)));
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
// oneDNN plumbing
// ---------------------------------------------------------------------------
dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

std::atomic<uint64_t>& primitives_created() {
  static std::atomic<uint64_t> n{0};
  return n;
}

dnnl::memory::data_type dnnl_type(tdm_dtype dtype) {
  switch (dtype) {
    case TDM_F32:
      return dnnl::memory::data_type::f32;
    case TDM_BF16:
      return dnnl::memory::data_type::bf16;
    case TDM_F16:
      return dnnl::memory::data_type::f16;
    case TDM_S32:
      return dnnl::memory::data_type::s32;
    case TDM_S8:
      return dnnl::memory::data_type::s8;
    case TDM_U8:
      return dnnl::memory::data_type::u8;
    default:
      throw Unsupported(std::string("onednn: no oneDNN data type for ") + dtype_name(dtype));
  }
}

dnnl::memory::dims to_dnnl(const Dims& d) {
  return dnnl::memory::dims(d.begin(), d.end());
}

dnnl::memory::desc plain_md(const Dims& dims, tdm_dtype dtype) {
  Dims d = dims.empty() ? Dims{1} : dims;  // a scalar is one element
  return dnnl::memory::desc(to_dnnl(d), dnnl_type(dtype), to_dnnl(strides_of(d)));
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

size_t PrimKernel::reserve(size_t bytes) {
  const size_t offset = ws_bytes_;
  ws_bytes_ += (bytes + 63) / 64 * 64;
  return offset;
}

dnnl::memory PrimKernel::bind(const dnnl::memory::desc& md, Slot slot) {
  dnnl::memory m(md, engine(), DNNL_MEMORY_NONE);
  bindings_.emplace_back(m, slot);
  return m;
}

void PrimKernel::add_step(dnnl::primitive p, const dnnl::primitive_desc_base& pd,
                          std::unordered_map<int, dnnl::memory> args) {
  ++primitives_created();
  const dnnl::memory::desc scratch = pd.scratchpad_desc();
  if (scratch.get_size() > 0)
    args[DNNL_ARG_SCRATCHPAD] = bind(scratch, {Slot::workspace, reserve(scratch.get_size())});
  if (pd.get_kind() == dnnl::primitive::kind::reorder) ++reorders_;
  if (!impl_.empty()) impl_ += "+";
  impl_ += pd.impl_info_str();
  steps_.push_back({std::move(p), std::move(args), nullptr});
}

void PrimKernel::launch(Stream& stream, void* const* in, void* const* out, void* ws) {
  char* w = static_cast<char*>(ws);
  for (auto& [mem, slot] : bindings_) {
    void* p = slot.kind == Slot::input    ? in[slot.index]
              : slot.kind == Slot::output ? out[slot.index]
                                          : w + slot.index;
    mem.set_data_handle(p);
  }
  dnnl::stream& s = dnnl_stream(stream);
  for (Step& step : steps_) {
    if (step.hook)
      step.hook(in, out, w);
    else
      step.prim.execute(s, step.args);
  }
}

const char* PrimKernel::describe() const noexcept {
  try {
    described_ = name_ + "(" + impl_ + ") reorders=" + std::to_string(reorders_) +
                 " primitives_created=" + std::to_string(primitives_created().load());
    return described_.c_str();
  } catch (...) {
    return name_.c_str();
  }
}

}  // namespace tandem::onednn
