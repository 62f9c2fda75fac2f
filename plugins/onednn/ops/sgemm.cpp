// oneDNN backend — the own GEMM's choices (sgemm.hpp): whether it runs, how
// the output is cut among threads, the packing buffers, the OpenMP team.
#include "sgemm.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpu_isa.hpp"

namespace tandem::onednn::sgemm {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// One thread's share: row panels [r0, r1) of kMr rows, column panels [c0, c1)
// of kNr columns, in element units clipped to the matrix.
struct Part {
  int64_t m0, m1, n0, n1;
};
Part part_of(const Problem& p, const Split& s, int t) {
  const int64_t rows = ceil_div(p.m, kMr), cols = ceil_div(p.n, kNr);
  const int64_t ti = t / s.tn, tj = t % s.tn;
  return {std::min(p.m, rows * ti / s.tm * kMr), std::min(p.m, rows * (ti + 1) / s.tm * kMr),
          std::min(p.n, cols * tj / s.tn * kNr), std::min(p.n, cols * (tj + 1) / s.tn * kNr)};
}

// Floats of one thread's buffers: an A block (+ the 8 pack_a may spill) and
// a B block as wide as the thread's widest column range (at most kNc).
size_t pa_floats() {
  return size_t(kMc * kKc + 8);
}
size_t pb_floats(const Problem& p, const Split& s) {
  const int64_t widest = ceil_div(ceil_div(p.n, kNr), s.tn) * kNr;
  return size_t(std::min(kKc, p.k) * std::min(kNc, widest));
}
// 64-byte multiples, so every thread's buffers start on a cache line.
size_t per_thread_floats(const Problem& p, const Split& s) {
  return (pa_floats() + pb_floats(p, s) + 15) / 16 * 16;
}

}  // namespace

Split split_for(int64_t m, int64_t n, int64_t k, int threads) {
  // Below ~1 MFLOP a second thread costs more to wake than it saves.
  if (threads <= 1 || m * n * k < (int64_t(1) << 19)) return {};
  const int64_t rows = ceil_div(m, kMr), cols = ceil_div(n, kNr);
  Split best;
  double best_cost = -1;
  for (int tm = 1; tm <= threads; ++tm) {
    if (threads % tm != 0) continue;
    const int tn = threads / tm;
    if (tm > rows || tn > cols) continue;
    // The largest part's multiply-adds (16 a cycle) plus its packing: every
    // A element once per column block of kNc, every B element once (a
    // packed element costs about as much as 8 multiply-adds).
    const double r = double(ceil_div(rows, tm) * kMr), c = double(ceil_div(cols, tn) * kNr);
    const double cost =
        r * c * double(k) / 16 + 0.5 * double(k) * (r * double(ceil_div(int64_t(c), kNc)) + c);
    if (best_cost < 0 || cost < best_cost) best = {tm, tn}, best_cost = cost;
  }
  return best_cost < 0 ? Split{} : best;
}

bool serves(const Problem& p) {
  // TANDEM_ONEDNN_OWN_SGEMM: "0" never (A/B measurements), "all" every
  // product the register block fits (tests of small shapes), else the rule.
  enum class Mode { never, rule, all };
  static const Mode mode = [] {
    const char* v = std::getenv("TANDEM_ONEDNN_OWN_SGEMM");
    if (v != nullptr && std::strcmp(v, "0") == 0) return Mode::never;
    if (v != nullptr && std::strcmp(v, "all") == 0) return Mode::all;
    return Mode::rule;
  }();
  if (mode == Mode::never || cpu_vector_level() != VectorLevel::avx2_fma) return false;
  if (p.m < kMr || p.n < kNr || p.k < 8 || (p.row_sums && !p.a_transposed)) return false;
  // Measured (`tandem bench --profile`, TANDEM_ONEDNN_OWN_SGEMM=0 against
  // 1, 1 and 2 threads): the GEMM-bound MLP's products (268 M multiply-adds)
  // 8-24 % faster here, GPT's (151-453 M) as fast; the Fashion-MNIST MLP's
  // (at most 26 M) no faster, so they stay on oneDNN.
  return mode == Mode::all || p.m * p.n * p.k >= (int64_t(1) << 25);
}

size_t workspace_bytes(const Problem& p, int threads) {
  const Split s = split_for(p.m, p.n, p.k, threads);
  return size_t(s.tm * s.tn) * per_thread_floats(p, s) * sizeof(float) + 64;
}

void run(const Problem& p, const float* a, const float* b, const float* bias, float* c, float* row_sums,
         void* workspace, int threads) {
  const Split s = split_for(p.m, p.n, p.k, threads);
  const int parts = s.tm * s.tn;
  // Every thread's buffers start on a cache line (workspace_bytes left the
  // 64 bytes this may skip).
  auto* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(workspace) + 63) / 64 * 64);
  const size_t each = per_thread_floats(p, s);
#pragma omp parallel num_threads(parts) if (parts > 1)
  {
    // A team smaller than asked for takes the parts in turn.
    for (int t = omp_get_thread_num(); t < parts; t += omp_get_num_threads()) {
      const Part w = part_of(p, s, t);
      float* pa = base + size_t(t) * each;
      // The parts of the first column group sum their rows.
      float* sums = p.row_sums && w.n0 == 0 ? row_sums : nullptr;
      if (w.m0 < w.m1 && w.n0 < w.n1)
        avx2::rectangle(p, a, b, bias, c, sums, w.m0, w.m1, w.n0, w.n1, pa, pa + pa_floats());
    }
  }
}

}  // namespace tandem::onednn::sgemm
