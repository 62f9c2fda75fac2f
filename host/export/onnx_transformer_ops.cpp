// rms_norm, rope and attention, spelled out in opset-17 nodes (ONNX has no
// such ops before opset 23):
//   rms_norm   x / sqrt(mean(x², last axis) + ε) · γ
//   rope       the halves layout: [x1·cos − x2·sin, x2·cos + x1·sin], the
//              angles of every position of the graph's fixed T computed in
//              f64 here (as the catalog requires, llama3 scaling included)
//              and stored as f32 tables
//   attention  softmax(scale·q·kᵀ + mask)·v, the kv heads repeated for
//              grouped-query attention, the causal mask aligned bottom-right
//              as a constant; no dropout (an evaluation graph has none)
#include <cmath>
#include <limits>

#include "export/onnx_ops.hpp"
#include "ops/op_table.hpp"
#include "tandem/rope_frequency.hpp"

namespace tandem::host::exporting {
namespace {

using ops::float_attr;
using ops::int_attr;

const std::vector<int64_t>& dims_of(OnnxBuilder& b, ValueId id) {
  return b.graph().value(id)->type.dims;
}

Result<void> rms_norm(OnnxBuilder& b, const Node& n) {
  const tdm_dtype t = b.graph().value(n.inputs[0])->type.dtype;
  const std::string x = b.name(n.inputs[0]);
  const std::string sq = b.fresh(n.name + "/square"), mean = b.fresh(n.name + "/mean"),
                    eps = b.fresh(n.name + "/plus_eps"), root = b.fresh(n.name + "/rms"),
                    normed = b.fresh(n.name + "/normed");
  b.node("Mul", {x, x}, {sq}, n.name);
  onnx::NodeProto& m = b.node("ReduceMean", {sq}, {mean}, n.name);
  set_ints(m, "axes", {-1});
  set_int(m, "keepdims", 1);
  b.node("Add", {mean, b.scalar(n.name + "/epsilon", t, float_attr(n, "epsilon"))}, {eps}, n.name);
  b.node("Sqrt", {eps}, {root}, n.name);
  b.node("Div", {x, root}, {normed}, n.name);
  b.node("Mul", {normed, b.name(n.inputs[1])}, {b.name(n.outputs[0])}, n.name);
  return {};
}

Result<void> rope(OnnxBuilder& b, const Node& n) {
  if (n.inputs.size() > 1 && n.inputs[1] != kNoValue)
    return not_exportable(n, "rope with a position offset (a decoding graph; export the evaluation graph)");
  const std::vector<int64_t>& d = dims_of(b, n.inputs[0]);
  if (d.size() < 2 || d.back() % 2 != 0)
    return not_exportable(n, "rope over a shape that is not [..., T, even D]");
  const int64_t T = d[d.size() - 2], half = d.back() / 2;
  // The node's attributes as the SDK's frequency reader wants them.
  struct Attrs {
    const Node& n;
    double float_attr(const char* k) const { return ops::float_attr(n, k); }
    int64_t int_attr(const char* k) const { return ops::int_attr(n, k); }
    std::string string_attr(const char* k) const { return ops::string_attr(n, k); }
  };
  const RopeFrequency frequency = rope_frequency_of(Attrs{n});
  std::vector<float> cos_table(size_t(T * half)), sin_table(size_t(T * half));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double theta = double(t) * frequency(i, half);
      cos_table[size_t(t * half + i)] = float(std::cos(theta));
      sin_table[size_t(t * half + i)] = float(std::sin(theta));
    }
  const std::string cosines = b.floats(n.name + "/cos", cos_table, {T, half});
  const std::string sines = b.floats(n.name + "/sin", sin_table, {T, half});
  const std::string x1 = b.fresh(n.name + "/x1"), x2 = b.fresh(n.name + "/x2");
  onnx::NodeProto& split =
      b.node("Split", {b.name(n.inputs[0]), b.ints(n.name + "/halves", {half, half}, {2})}, {x1, x2}, n.name);
  set_int(split, "axis", -1);
  auto product = [&](const std::string& a, const std::string& c) {
    const std::string out = b.fresh(n.name + "/product");
    b.node("Mul", {a, c}, {out}, n.name);
    return out;
  };
  const std::string y1 = b.fresh(n.name + "/y1"), y2 = b.fresh(n.name + "/y2");
  b.node("Sub", {product(x1, cosines), product(x2, sines)}, {y1}, n.name);
  b.node("Add", {product(x2, cosines), product(x1, sines)}, {y2}, n.name);
  set_int(b.node("Concat", {y1, y2}, {b.name(n.outputs[0])}, n.name), "axis", -1);
  return {};
}

// k or v [B, G, S, D] as [B, H, S, D]: each kv head repeated H/G times
// (query head h reads kv head h / (H/G)).
std::string repeat_heads(OnnxBuilder& b, const Node& n, ValueId id, int64_t H) {
  const std::vector<int64_t>& d = dims_of(b, id);
  const int64_t G = d[1];
  if (G == H) return b.name(id);
  const std::string wide = b.fresh(n.name + "/unsqueezed"), tiled = b.fresh(n.name + "/repeated"),
                    out = b.fresh(n.name + "/heads");
  b.node("Unsqueeze", {b.name(id), b.ints(n.name + "/axis2", {2}, {1})}, {wide}, n.name);
  b.node("Expand", {wide, b.ints(n.name + "/expand", {1, 1, H / G, 1, 1}, {5})}, {tiled}, n.name);
  b.node("Reshape", {tiled, b.ints(n.name + "/merge", {0, H, d[2], d[3]}, {4})}, {out}, n.name);
  return out;
}

Result<void> attention(OnnxBuilder& b, const Node& n) {
  if (n.inputs.size() > 3 && n.inputs[3] != kNoValue)
    return not_exportable(
        n, "attention with a key-padding mask (a decoding graph; export the evaluation graph)");
  if (float_attr(n, "dropout") != 0.0) return not_exportable(n, "attention with dropout");
  const std::vector<int64_t>& q = dims_of(b, n.inputs[0]);
  const std::vector<int64_t>& k = dims_of(b, n.inputs[1]);
  const int64_t H = q[1], T = q[2], D = q[3], S = k[2];
  double scale = float_attr(n, "scale");
  if (scale == 0.0) scale = 1.0 / std::sqrt(double(D));
  const std::string keys = repeat_heads(b, n, n.inputs[1], H), values = repeat_heads(b, n, n.inputs[2], H);
  const std::string kt = b.fresh(n.name + "/kT"), raw = b.fresh(n.name + "/scores"),
                    scaled = b.fresh(n.name + "/scaled"), probs = b.fresh(n.name + "/probabilities");
  set_ints(b.node("Transpose", {keys}, {kt}, n.name), "perm", {0, 1, 3, 2});
  b.node("MatMul", {b.name(n.inputs[0]), kt}, {raw}, n.name);
  b.node("Mul", {raw, b.scalar(n.name + "/scale", TDM_F32, scale)}, {scaled}, n.name);
  std::string logits = scaled;
  if (int_attr(n, "causal") != 0) {  // key s allowed for query t when s <= t + S - T
    std::vector<float> mask(size_t(T * S));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t s = 0; s < S; ++s)
        mask[size_t(t * S + s)] = s <= t + S - T ? 0.0f : -std::numeric_limits<float>::infinity();
    logits = b.fresh(n.name + "/masked");
    b.node("Add", {scaled, b.floats(n.name + "/causal", mask, {T, S})}, {logits}, n.name);
  }
  set_int(b.node("Softmax", {logits}, {probs}, n.name), "axis", -1);
  b.node("MatMul", {probs, values}, {b.name(n.outputs[0])}, n.name);
  return {};
}

}  // namespace

void add_transformer_converters(ConverterTable& table) {
  table.emplace("rms_norm", rms_norm);
  table.emplace("rope", rope);
  table.emplace("attention", attention);
}

}  // namespace tandem::host::exporting
