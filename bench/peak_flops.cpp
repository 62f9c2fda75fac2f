// The machine's measured f32 peak: an AVX-512 FMA loop on N threads.
//
// Each thread runs 16 independent accumulator chains of 16-lane FMAs (enough
// to cover FMA latency x throughput on two FMA ports), so the loop is bound
// by FMA issue alone. One FMA on 16 floats = 32 FLOP. The best of several
// runs is reported, in GFLOP/s, on stdout as a bare number (bench/run.sh
// reads it) and described on stderr.
//
// Build: g++ -O3 -march=native -fopenmp peak_flops.cpp -o peak_flops
// Run:   ./peak_flops THREADS
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr int kChains = 16;

float fma_loop(long iterations, float seed) {
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

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : omp_get_max_threads();
  if (threads < 1) {
    std::fprintf(stderr, "usage: peak_flops THREADS\n");
    return 2;
  }
  omp_set_num_threads(threads);
  const long iterations = 50'000'000;  // about 0.2 s per thread at ~4 GHz
  double best = 0;
  volatile float sink = 0;
  for (int run = 0; run < 5; ++run) {
    const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    {
      const float r = fma_loop(iterations, static_cast<float>(omp_get_thread_num()));
#pragma omp critical
      sink = sink + r;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = 32.0 * kChains * static_cast<double>(iterations) * threads;
    best = std::max(best, flops / s * 1e-9);
  }
  std::fprintf(stderr, "peak_flops: AVX-512 FMA loop, %d threads, best of 5: %.1f GFLOP/s f32\n", threads,
               best);
  std::printf("%.1f\n", best);
  return 0;
}
