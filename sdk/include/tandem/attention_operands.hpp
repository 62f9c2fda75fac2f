// Tandem SDK — the operands of attention and attention_grad (sdk/ops.md,
// attention) read into their sizes and attributes, part of the header-only
// C++ helper. tandem::KernelRegistry has checked them before a factory runs
// (the attention rules of tandem/op_shapes.hpp: q, k and v's dtype and
// rank, the `layout`, the key/value heads dividing the query heads, the
// optional mask and seed_offset; the catalog: causal, scale, dropout in
// [0, 1), seed). A backend adds its own refusals around it: which dtypes it
// implements (before, through primary_dtype), which head widths its
// kernels hold (after).
#ifndef TANDEM_ATTENTION_OPERANDS_HPP
#define TANDEM_ATTENTION_OPERANDS_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tandem/attention_layout.hpp"
#include "tandem/backend_kit.hpp"

namespace tandem {

// What the checks found: B batches of H query heads over T positions and G
// key/value heads over S positions, q and k D wide, v E wide.
struct AttentionOperands {
  AttentionLayout layout;
  int64_t B = 0, H = 0, G = 0, T = 0, S = 0, D = 0, E = 0;
  bool causal = false;
  double scale = 0;    // the attribute, or 1/√D where it is 0 (its default)
  double dropout = 0;  // in [0, 1)
  uint64_t seed = 0;
  bool has_mask = false, has_offset = false;
  size_t mask_slot = 0, offset_slot = 0;

  // The dims of a q-like tensor of `heads` heads, n positions and width w.
  Dims shape(int64_t heads, int64_t n, int64_t w) const { return layout.dims(B, heads, n, w); }
};

// q, k, v at inputs first, first + 1 and first + 2; the optional mask and
// seed_offset at inputs `extras` and `extras + 1`. `dt` is the dtype the
// backend chose with primary_dtype (the registry has checked that k and v
// share it).
inline AttentionOperands check_attention_operands(const Check& c, size_t first, size_t extras,
                                                  [[maybe_unused]] tdm_dtype dt) {
  AttentionOperands a;
  AttentionLayout::parse(c.string_attr("layout"), a.layout);
  const size_t heads = size_t(a.layout.heads_axis()), positions = size_t(a.layout.positions_axis());
  const Dims q = c.in(first).dims, k = c.in(first + 1).dims, v = c.in(first + 2).dims;
  a.B = q[0], a.H = q[heads], a.T = q[positions], a.D = q[3], a.G = k[heads], a.S = k[positions], a.E = v[3];
  a.mask_slot = extras, a.offset_slot = extras + 1;
  a.has_mask = c.has_input(a.mask_slot);
  a.has_offset = c.has_input(a.offset_slot);
  a.causal = c.int_attr("causal") != 0;
  a.scale = c.float_attr("scale");
  if (a.scale == 0) a.scale = 1 / std::sqrt(double(a.D ? a.D : 1));
  a.dropout = c.float_attr("dropout");
  a.seed = uint64_t(c.int_attr("seed"));
  return a;
}

}  // namespace tandem

#endif  // TANDEM_ATTENTION_OPERANDS_HPP
