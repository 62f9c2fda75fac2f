// What oneDNN's own matrix product reaches on the GEMM-bound MLP's three
// products (bench/models/gemm_mlp.toml: batch 256, 1024 wide), on N threads,
// with nothing else in the process: the ceiling that workload's "% of the
// FMA peak" is read against.
//
// The three products of one layer's training step, as the onednn plugin
// describes them to oneDNN (transposed operands as swapped strides, read in
// place), less the forward's bias and relu post-ops: y = x·wᵀ (256 x 1024 x
// 1024), dx = dy·w (the same), dw = dyᵀ·x (1024 x 1024 x 256). Each is
// timed twice: warm (its operands were just used, so they sit in the caches)
// and cold (a buffer twice the last-level cache was written first, as a
// training step's other layers and optimizer do between two uses of a
// layer's weights). Best of the runs; the sum of the three times gives the
// GFLOP/s of the set.
//
// Prints one line per product to stderr and "WARM COLD" (GFLOP/s of the
// set) on stdout, which bench/run.sh keeps beside peak_flops' number.
// oneDNN's effective ISA follows ONEDNN_MAX_CPU_ISA, as in the plugin; under
// an AVX2 limit the plugin runs these products on its own GEMM instead
// (plugins/onednn/README.md, "The own GEMM"), so the figure then describes
// oneDNN's AVX2 kernel, not Tandem's.
//
// Build: g++ -O2 -fopenmp gemm_ceiling.cpp -ldnnl -o gemm_ceiling (oneDNN 2 or 3: add
// -I/-L for another oneDNN than the system's, e.g. PyPI's onednn-cpu-gomp)
// Run:   ./gemm_ceiling THREADS [BATCH WIDTH]
#include <omp.h>
#include <unistd.h>
#include <dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using dnnl::memory;

struct Product {
  const char* name;
  memory::dim m, n, k;
  bool a_transposed, b_transposed;  // a stored [k, m]; b stored [n, k]
};

// Bytes that push every operand out of the last-level cache: twice its size
// (at least 64 MiB where sysconf does not know it).
size_t eviction_bytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return std::max<size_t>(size_t(64) << 20, l3 > 0 ? 2 * size_t(l3) : 0);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Timing {
  double warm = 1e30, cold = 1e30;
};

Timing time_product(const Product& p, dnnl::engine& engine, std::vector<char>& evict, int runs) {
  const memory::desc a_md({p.m, p.k}, memory::data_type::f32,
                          p.a_transposed ? memory::dims{1, p.m} : memory::dims{p.k, 1});
  const memory::desc b_md({p.k, p.n}, memory::data_type::f32,
                          p.b_transposed ? memory::dims{1, p.k} : memory::dims{p.n, 1});
  const memory::desc c_md({p.m, p.n}, memory::data_type::f32, memory::dims{p.n, 1});
#if DNNL_VERSION_MAJOR >= 3  // oneDNN 3 builds a primitive descriptor without an op descriptor
  const dnnl::matmul::primitive_desc pd(engine, a_md, b_md, c_md);
#else
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), engine);
#endif
  const dnnl::matmul product(pd);
  std::vector<float> a(size_t(p.m * p.k)), b(size_t(p.k * p.n)), c(size_t(p.m * p.n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 97) / 97.f - 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(i % 89) / 89.f - 0.5f;
  memory am(a_md, engine, a.data()), bm(b_md, engine, b.data()), cm(c_md, engine, c.data());
  dnnl::stream stream(engine);
  const auto run = [&] {
    const auto start = std::chrono::steady_clock::now();
    product.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream.wait();
    return seconds_since(start);
  };
  run();  // creates oneDNN's kernels and scratchpad
  Timing t;
  for (int r = 0; r < runs; ++r) {
    t.warm = std::min(t.warm, run());
    std::memset(evict.data(), r + 1, evict.size());
    t.cold = std::min(t.cold, run());
  }
  std::fprintf(stderr, "gemm_ceiling: %s (%s) %lld x %lld x %lld: warm %.1f, cold %.1f GFLOP/s\n", p.name,
               pd.impl_info_str(), static_cast<long long>(p.m), static_cast<long long>(p.n),
               static_cast<long long>(p.k), 2e-9 * double(p.m * p.n * p.k) / t.warm,
               2e-9 * double(p.m * p.n * p.k) / t.cold);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    std::fprintf(stderr, "usage: gemm_ceiling THREADS [BATCH WIDTH]\n");
    return 2;
  }
  const int threads = std::atoi(argv[1]);
  const memory::dim batch = argc == 4 ? std::atoll(argv[2]) : 256,
                    width = argc == 4 ? std::atoll(argv[3]) : 1024;
  if (threads < 1 || batch < 1 || width < 1) {
    std::fprintf(stderr, "gemm_ceiling: THREADS, BATCH and WIDTH must be positive\n");
    return 2;
  }
  omp_set_num_threads(threads);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  std::vector<char> evict(eviction_bytes());
  const Product products[] = {{"y = x·wT", batch, width, width, false, true},
                              {"dx = dy·w", batch, width, width, false, false},
                              {"dw = dyT·x", width, width, batch, true, false}};
  double flop = 0, warm = 0, cold = 0;
  for (const Product& p : products) {
    const Timing t = time_product(p, engine, evict, 10);
    flop += 2.0 * double(p.m * p.n * p.k);
    warm += t.warm;
    cold += t.cold;
  }
  std::printf("%.1f %.1f\n", 1e-9 * flop / warm, 1e-9 * flop / cold);
  return 0;
}
