// CUDA backend — the per-element rules of attention (sdk/ops.md,
// "attention"), shared by the tiled kernels of ops/attention.cu and the CPU
// tests: which keys a query may see, the dropout factor of the catalog's
// counter mask, the online-softmax step, and the gradient's recomputed
// probability and ds.
//
// Online softmax: a row keeps its running maximum m and the sum l of
// exp(score − m) over the keys seen so far. A new tile with maximum m_t
// moves the maximum to m' = max(m, m_t); what was accumulated under m is
// multiplied by exp(m − m'), the tile's scores contribute exp(score − m').
// Until some key is allowed m stays −inf, and −inf − (−inf) would be NaN:
// the step then keeps everything as it is (factor 1, probabilities 0).
#ifndef TANDEM_CUDA_MATH_ATTENTION_HPP
#define TANDEM_CUDA_MATH_ATTENTION_HPP

#include <cmath>
#include <cstdint>

#include "math/common.hpp"
#include "tandem/dropout_mask.hpp"

namespace tandem::cuda::math {

// Query t may see key s: not a padding key, and with causal, the last query
// aligned with the last key (s ≤ t + S − T).
TDM_HD inline bool attention_allowed(bool padded, bool causal, int64_t t, int64_t s, int64_t T, int64_t S) {
  return !padded && (!causal || s <= t + S - T);
}

// The flat index of (b, h, t, s) in [B, H, T, S]: the dropout mask's counter.
TDM_HD inline uint64_t attention_flat_index(int64_t b, int64_t h, int64_t t, int64_t s, int64_t H, int64_t T,
                                            int64_t S) {
  return static_cast<uint64_t>(((b * H + h) * T + t) * S + s);
}

// d_s: 1/(1 − p) where the catalog's mask keeps the element, else 0;
// inv_keep = 1/(1 − p) is rounded to f32 once on the host.
TDM_HD inline float attention_dropout(uint64_t seed, uint64_t flat, float p, float inv_keep) {
  return tandem::dropout_keep(seed, flat, p) ? inv_keep : 0.0f;
}

// The factor that rescales what was accumulated under m_old once the
// maximum is m_new (≥ m_old).
TDM_HD inline float online_rescale(float m_old, float m_new) {
  return m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
}

// exp(score − m_new), 0 for a disallowed key (score −inf) or while no key
// has been allowed.
TDM_HD inline float online_prob(float score, float m_new) {
  return m_new == -INFINITY ? 0.0f : expf(score - m_new);
}

// The saved statistic: log Σ exp(score) = m + log l; −inf for a row that
// saw no allowed key (l = 0).
TDM_HD inline float online_lse(float m, float l) {
  return l > 0.0f ? m + logf(l) : -INFINITY;
}

// The gradient's probability from the saved lse; a row with lse = −inf
// attended nothing and a disallowed key has none.
TDM_HD inline float attention_prob(float score, float lse, bool allowed) {
  return allowed && lse != -INFINITY ? expf(score - lse) : 0.0f;
}

// ds = p·(d·dp − Δ), with dp = do·v and Δ = do·o of the row.
TDM_HD inline float attention_ds(float p, float d, float dp, float delta) {
  return p * (d * dp - delta);
}

}  // namespace tandem::cuda::math

#endif  // TANDEM_CUDA_MATH_ATTENTION_HPP
