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

namespace {

// A weight gradient's product is deep and narrow: GPT's [192 x 192] summed
// over 4096 tokens. Cut among threads by rows or columns, each thread packs
// all of one operand (4096 x 192 floats, read from memory by both threads):
// on 2 threads the weight gradients of bench/models/gpt.toml ran at 111
// GFLOP/s, 55 % of the FMA peak, the other products at 122-130. So such a
// product is summed as two halves of the depth, one into c and one into a
// buffer, then added, and each thread packs half of each operand: their
// time fell from 133-142 to 110-129 ms a step (`tandem bench
// bench/models/gpt.toml --threads 2 --profile`, 5 alternating pairs of the
// two plugins). The four GPT weight-gradient shapes alone, both versions
// linked into one program and alternating, caches flushed, each version
// in turn as the first-linked copy: 2-5 % faster on 2 threads, 0-3 %
// slower on 1 (the addition and its buffer). The halves are a
// property of the product, not of the thread count, so the bits stay the
// same on any number of threads. Only a stored transposed and b not,
// without bias or relu: the weight gradient's shape, whose halves are plain
// row offsets into both operands. The second half's buffer is as large as
// c and is planned memory, so only for outputs of at most 2^21 floats
// (8 MiB): the narrow products where the duplicated packing costs most,
// not a vocabulary-wide head's.
constexpr int64_t kHalvedDepth = 8 * kKc, kMaxHalvedOutput = int64_t(1) << 21;
bool halves_depth(const Problem& p) {
  return p.a_transposed && !p.b_transposed && !p.bias && !p.relu && p.k >= kHalvedDepth &&
         p.m * p.n <= kMaxHalvedOutput;
}

// How run cuts a product: the depth in one or two halves (the first
// `first_depth` deep), each half cut among `threads / halves` threads.
struct Plan {
  int halves = 1;
  int64_t first_depth = 0;
  Problem half[2];
  Split split;
  int units = 1;  // halves x parts of a half, each with its own buffers
  size_t unit_floats = 0;
};
Plan plan_for(const Problem& p, int threads) {
  Plan plan;
  plan.halves = halves_depth(p) ? 2 : 1;
  plan.first_depth = plan.halves == 1 ? p.k : ceil_div(p.k / 2, kKc) * kKc;
  plan.half[0] = plan.half[1] = p;
  plan.half[0].k = plan.first_depth;
  plan.half[1].k = p.k - plan.first_depth;
  plan.split = split_for(p.m, p.n, plan.first_depth, std::max(1, threads / plan.halves));
  plan.units = plan.halves * plan.split.tm * plan.split.tn;
  plan.unit_floats = per_thread_floats(plan.half[0], plan.split);
  return plan;
}

// The second half's sums: c's m x n, then row_sums' m (64-byte aligned).
size_t second_half_floats(const Plan& plan, const Problem& p) {
  return plan.halves == 1 ? 0 : size_t(p.m * p.n + p.m + 15) / 16 * 16;
}

}  // namespace

size_t workspace_bytes(const Problem& p, int threads) {
  const Plan plan = plan_for(p, threads);
  return (size_t(plan.units) * plan.unit_floats + second_half_floats(plan, p)) * sizeof(float) + 64;
}

void run(const Problem& p, const float* a, const float* b, const float* bias, float* c, float* row_sums,
         void* workspace, int threads) {
  const Plan plan = plan_for(p, threads);
  const int parts = plan.split.tm * plan.split.tn;
  // Every unit's buffers start on a cache line (workspace_bytes left the
  // 64 bytes this may skip); the second half's sums follow them.
  auto* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(workspace) + 63) / 64 * 64);
  float* second_c = base + size_t(plan.units) * plan.unit_floats;
  float* second_sums = second_c + p.m * p.n;
  const int team = std::min(plan.units, threads);
#pragma omp parallel num_threads(team) if (team > 1)
  {
    // A team smaller than asked for takes the units in turn.
    for (int u = omp_get_thread_num(); u < plan.units; u += omp_get_num_threads()) {
      const int h = u / parts;
      const Problem& q = plan.half[h];
      const Part w = part_of(q, plan.split, u % parts);
      // The second half starts first_depth rows into both operands (a
      // stored [k, m], b [k, n]).
      const int64_t k0 = h == 0 ? 0 : plan.first_depth;
      float* pa = base + size_t(u) * plan.unit_floats;
      // The parts of the first column group sum their rows.
      float* sums = p.row_sums && w.n0 == 0 ? (h == 0 ? row_sums : second_sums) : nullptr;
      if (w.m0 < w.m1 && w.n0 < w.n1)
        avx2::rectangle(q, a + k0 * p.m, b + k0 * p.n, bias, h == 0 ? c : second_c, sums, w.m0, w.m1, w.n0,
                        w.n1, pa, pa + pa_floats());
    }
    if (plan.halves == 2) {
#pragma omp barrier
#pragma omp for
      for (int64_t i = 0; i < p.m; ++i) {
        float* row = c + i * p.n;
        const float* add = second_c + i * p.n;
#pragma omp simd
        for (int64_t j = 0; j < p.n; ++j) row[j] += add[j];
        if (p.row_sums) row_sums[i] += second_sums[i];
      }
    }
  }
}

}  // namespace tandem::onednn::sgemm
