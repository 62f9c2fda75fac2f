// Tandem SDK — where attention's rows live (sdk/ops.md, attention's
// `layout`), part of the header-only C++ helper.
//
// A q-like tensor of attention (q, k, v, o and their gradients) has, per
// batch, `heads` heads of n positions (queries or keys) of width w. Layout
// "bhtd" (the default) stores it [B, heads, n, w]; "bthd" stores it
// [B, n, heads, w], as a projection's token rows [B·n, heads·w] read after a
// reshape. Either way the rows of one head are a strided matrix: row `pos`
// of head `head` starts at row(b, head, pos, ...) and consecutive
// positions are stride(heads, w) elements apart. Usable in CUDA device code
// (TANDEM_HOST_DEVICE, from tandem/half.hpp).
#ifndef TANDEM_ATTENTION_LAYOUT_HPP
#define TANDEM_ATTENTION_LAYOUT_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/half.hpp"

namespace tandem {

struct AttentionLayout {
  bool tokens_first = false;  // "bthd"

  // Reads the `layout` attribute's value; false when it names no layout.
  static bool parse(const std::string& name, AttentionLayout& out) {
    if (name != "bhtd" && name != "bthd") return false;
    out.tokens_first = name == "bthd";
    return true;
  }

  // The axes of the heads and of the positions.
  TANDEM_HOST_DEVICE int heads_axis() const { return tokens_first ? 2 : 1; }
  TANDEM_HOST_DEVICE int positions_axis() const { return tokens_first ? 1 : 2; }

  // The dims of a tensor of `heads` heads, n positions and width w.
  std::vector<int64_t> dims(int64_t batch, int64_t heads, int64_t n, int64_t w) const {
    return tokens_first ? std::vector<int64_t>{batch, n, heads, w} : std::vector<int64_t>{batch, heads, n, w};
  }

  // The first element of row `pos` of head `head` of batch b in such a
  // tensor, and the distance between two consecutive positions' rows.
  TANDEM_HOST_DEVICE int64_t row(int64_t b, int64_t head, int64_t pos, int64_t heads, int64_t n,
                                 int64_t w) const {
    return (tokens_first ? (b * n + pos) * heads + head : (b * heads + head) * n + pos) * w;
  }
  TANDEM_HOST_DEVICE int64_t stride(int64_t heads, int64_t w) const { return tokens_first ? heads * w : w; }
};

}  // namespace tandem

#endif  // TANDEM_ATTENTION_LAYOUT_HPP
