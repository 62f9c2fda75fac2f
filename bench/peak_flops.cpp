// The machine's measured f32 FMA peak on N threads, with the widest vector
// unit the CPU has (AVX-512, else AVX2 + FMA), or the one a limit names.
//
// Each thread runs independent accumulator chains of vector FMAs, enough to
// cover FMA latency x throughput on two FMA ports (4 x 2 = 8 on current
// cores), and few enough that they and the two operands stay in registers:
// 16 of AVX-512's 32 zmm, but 12 of AVX2's 16 ymm (16 chains there spilled
// to memory and measured 86 instead of ~137 GFLOP/s on a Zen 5 core, which a
// GEMM then "beat"). So the loop is bound by FMA issue alone. One FMA on L floats = 2L FLOP. The best of
// several runs is reported, in GFLOP/s, on stdout as a bare number (bench/run.sh reads it) and described on
// stderr with the vector unit used.
//
// The ISA is chosen at run time (cpuid through __builtin_cpu_supports), so
// one binary, built without -march, runs on every x86-64 CPU. The widest unit
// is capped by ONEDNN_MAX_CPU_ISA when it names a narrower one (AVX2, or
// anything below AVX512): the peak then matches what oneDNN is allowed to
// use in the same run.
//
// Build: g++ -O3 -fopenmp peak_flops.cpp -o peak_flops
// Run:   ./peak_flops THREADS
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

constexpr int kChains = 16;      // zmm
constexpr int kChainsAvx2 = 12;  // ymm

__attribute__((target("avx512f"))) float fma_loop_avx512(long iterations, float seed) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f);
  const __m512 b = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < iterations; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(long iterations, float seed) {
  __m256 acc[kChainsAvx2];
  for (int i = 0; i < kChainsAvx2; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f);
  const __m256 b = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < iterations; ++it)
    for (int i = 0; i < kChainsAvx2; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 sum = acc[0];
  for (int i = 1; i < kChainsAvx2; ++i) sum = _mm256_add_ps(sum, acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

struct Unit {
  const char* name;
  int lanes;
  int chains;
  float (*loop)(long, float);
};

// ONEDNN_MAX_CPU_ISA below AVX512 (SSE41, AVX, AVX2, AVX2_VNNI) caps the
// unit at AVX2; anything else (ALL, AVX512_*, unset) leaves it uncapped.
bool limited_to_avx2() {
  const char* v = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (v == nullptr) return false;
  std::string isa(v);
  std::transform(isa.begin(), isa.end(), isa.begin(), [](unsigned char c) { return char(std::toupper(c)); });
  return isa.rfind("AVX512", 0) != 0 && isa != "ALL" && !isa.empty();
}

bool choose_unit(Unit* out) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && !limited_to_avx2()) {
    *out = {"AVX-512", 16, kChains, fma_loop_avx512};
    return true;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *out = {"AVX2+FMA", 8, kChainsAvx2, fma_loop_avx2};
    return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : omp_get_max_threads();
  if (threads < 1) {
    std::fprintf(stderr, "usage: peak_flops THREADS\n");
    return 2;
  }
  Unit unit{};
  if (!choose_unit(&unit)) {
    std::fprintf(stderr, "peak_flops: this CPU has neither AVX-512 nor AVX2+FMA; no FMA peak to measure\n");
    return 1;
  }
  omp_set_num_threads(threads);
  // About 0.2 s per run at ~4 GHz with 16 lanes; the same number of FLOP
  // takes twice as many iterations on 8 lanes.
  const long iterations = 50'000'000L * 16 / unit.lanes;
  double best = 0;
  volatile float sink = 0;
  for (int run = 0; run < 5; ++run) {
    const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    {
      const float r = unit.loop(iterations, static_cast<float>(omp_get_thread_num()));
#pragma omp critical
      sink = sink + r;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = 2.0 * unit.lanes * unit.chains * static_cast<double>(iterations) * threads;
    best = std::max(best, flops / s * 1e-9);
  }
  std::fprintf(stderr, "peak_flops: %s FMA loop, %d threads, best of 5: %.1f GFLOP/s f32\n", unit.name,
               threads, best);
  std::printf("%.1f\n", best);
  return 0;
}
