// oneDNN backend — add, sub, mul with numpy broadcasting, and scale.
//
// f32/bf16: a dnnl binary primitive whenever only the second operand
// broadcasts (oneDNN broadcasts src1 only); add and mul swap their operands
// when it is the first that broadcasts. Everything else (both operands
// broadcast, or sub with a broadcast a) and s32 (which must wrap modulo 2^32,
// where oneDNN saturates) is an own strided loop, rows in parallel. scale
// (y = alpha·x + beta) is a flat dnnl eltwise_linear (eltwise_primitive.hpp).
#include "dnnl_api.hpp"
#include "eltwise_primitive.hpp"

namespace tandem::onednn {

namespace {

using dnnl::memory;

enum class Op { add, sub, mul };

Dims padded(const Dims& d, size_t rank) {
  Dims p(rank - d.size(), 1);
  p.insert(p.end(), d.begin(), d.end());
  return p;
}

// Element strides of `in` (padded to y's rank) broadcast to y: 0 where it is 1.
Dims broadcast_strides(const Dims& in, const Dims& y) {
  const Dims p = padded(in, y.size());
  Dims s = strides_of(p);
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] == 1 && y[i] != 1) s[i] = 0;
  return s;
}

template <class T, Op OP>
void strided(const T* a, const T* b, T* y, const Dims& dims, const Dims& sa, const Dims& sb) {
  const size_t r = dims.size();
  const int64_t inner = r ? dims[r - 1] : 1, ia = r ? sa[r - 1] : 0, ib = r ? sb[r - 1] : 0;
  const int64_t rows = inner ? numel(dims) / inner : 0;
#pragma omp parallel for schedule(static) if (rows * inner > kParallelGrain)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t oa = 0, ob = 0, rest = row;
    for (size_t k = r - 1; k-- > 0;) {
      const int64_t coord = rest % dims[k];
      rest /= dims[k];
      oa += coord * sa[k];
      ob += coord * sb[k];
    }
    T* yr = y + row * inner;
    for (int64_t i = 0; i < inner; ++i) {
      if constexpr (std::is_same_v<T, int32_t>) {
        const uint32_t x = uint32_t(a[oa + i * ia]), z = uint32_t(b[ob + i * ib]);
        yr[i] = int32_t(OP == Op::add ? x + z : OP == Op::sub ? x - z : x * z);
      } else {
        const float x = ld(a, oa + i * ia), z = ld(b, ob + i * ib);
        st(yr, i, OP == Op::add ? x + z : OP == Op::sub ? x - z : x * z);
      }
    }
  }
}

template <class T>
std::unique_ptr<Kernel> own(const Check& c, Op op, Dims y) {
  if (y.empty()) y = {1};  // a scalar is one element of rank 1
  const Dims sa = broadcast_strides(c.in(0).dims, y), sb = broadcast_strides(c.in(1).dims, y);
  return make_fn(c, [op, y, sa, sb](void* const* in, void* const* out, void*) {
    const T* a = static_cast<const T*>(in[0]);
    const T* b = static_cast<const T*>(in[1]);
    T* o = static_cast<T*>(out[0]);
    if (op == Op::add) strided<T, Op::add>(a, b, o, y, sa, sb);
    if (op == Op::sub) strided<T, Op::sub>(a, b, o, y, sa, sb);
    if (op == Op::mul) strided<T, Op::mul>(a, b, o, y, sa, sb);
  });
}

std::unique_ptr<Kernel> binary(const OpView& view, size_t& ws) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, {TDM_F32, TDM_BF16, TDM_S32});
  const Dims y = c.out(0).dims;  // a and b broadcast (the rule)
  const std::string name = view.op();
  const Op op = name == "add" ? Op::add : name == "sub" ? Op::sub : Op::mul;
  if (numel(y) == 0) return no_op(c);
  if (dt == TDM_S32) return own<int32_t>(c, op, y);
  // Which input can be oneDNN's src0 (the one with y's shape)?
  size_t src0 = 2;
  if (padded(c.in(0).dims, y.size()) == y)
    src0 = 0;
  else if (op != Op::sub && padded(c.in(1).dims, y.size()) == y)
    src0 = 1;
  if (src0 == 2) return dt == TDM_BF16 ? own<uint16_t>(c, op, y) : own<float>(c, op, y);
  const Dims yd = y.empty() ? Dims{1} : y;
  const Dims d1 = padded(c.in(1 - src0).dims, yd.size());
  const memory::desc m0 = plain_md(yd, dt), m1 = plain_md(d1, dt);
  const auto algo = op == Op::add   ? dnnl::algorithm::binary_add
                    : op == Op::sub ? dnnl::algorithm::binary_sub
                                    : dnnl::algorithm::binary_mul;
  auto k = std::make_unique<PrimKernel>(name);
  const auto pd = binary_pd(algo, m0, m1, m0, user_scratchpad_attr());
  k->add<dnnl::binary>(pd, {{DNNL_ARG_SRC_0, k->bind(m0, in_slot(src0))},
                            {DNNL_ARG_SRC_1, k->bind(m1, in_slot(1 - src0))},
                            {DNNL_ARG_DST, k->bind(m0, out_slot(0))}});
  ws = k->workspace_bytes();
  return k;
}

std::unique_ptr<Kernel> scale(const OpView& op, size_t& ws) {
  Check c(op);
  const float alpha = float(c.float_attr("alpha")), beta = float(c.float_attr("beta"));
  return eltwise_forward(c, dnnl::algorithm::eltwise_linear, alpha, beta, ws);
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  for (const char* op : {"add", "sub", "mul"}) r.add(op, binary);
  r.add("scale", scale);
});

}  // namespace

}  // namespace tandem::onednn
