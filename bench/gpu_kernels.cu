// The CUDA plugin's deterministic reductions at transformer sizes, against
// the kernels they replaced (bench/gpu_kernels_baseline.cuh): layer_norm's
// dgamma + dbeta, rms_norm's dgamma, the dbias of linear and conv2d
// (channel sums) and embedding_grad. Each runs through the same launcher
// the plugin calls (ops/column_sum.cuh, ops/embedding_grad.cuh) on data
// made on the GPU; the report is time per launch and achieved bandwidth —
// the bytes the op must move (every input element read once, every output
// element written once; not the ~1 % of partials the two stages exchange)
// over that time — as a share of the GPU's peak memory bandwidth (memory
// clock x bus width x 2, from the device attributes).
//
// Before timing, each new kernel is launched twice and must give the same
// bits, and must agree with the old kernel (embedding_grad: bit for bit,
// both add in position order; the column sums: within 1e-3 relative, their
// orders differ). Exit status: 0 measured, 1 a CUDA error or a check
// failed, 2 usage, 77 no usable GPU (nothing measured).
//
//   gpu_kernels [--quick] [--device N]
//
// --quick: small shapes, three timed launches each (the ctest
// cuda.bench.gpu_kernels_quick runs it: the checks, not the numbers).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu_kernels_baseline.cuh"
#include "ops/column_sum.cuh"
#include "ops/embedding_grad.cuh"

namespace {

namespace tc = tandem::cuda;
namespace mm = tandem::cuda::math;

constexpr int kExitFailed = 1, kExitUsage = 2, kExitNoGpu = 77;  // 77: ctest's SKIP_RETURN_CODE

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}
#define BENCH_CHECK(call) check((call), #call)

class Buffer {
 public:
  explicit Buffer(size_t bytes) : bytes_(bytes) { BENCH_CHECK(cudaMalloc(&p_, bytes > 0 ? bytes : 1)); }
  ~Buffer() { cudaFree(p_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  std::vector<uint8_t> read() const {
    std::vector<uint8_t> h(bytes_);
    BENCH_CHECK(cudaMemcpy(h.data(), p_, bytes_, cudaMemcpyDeviceToHost));
    return h;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

__device__ float hash_unit(int64_t i, uint32_t seed) {  // in [-1, 1)
  uint64_t z = uint64_t(i) * 0x9E3779B97F4A7C15ull + seed;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return float(uint32_t(z >> 40)) * 0x1p-23f - 1.0f;
}

template <class T>
__global__ void fill_kernel(T* p, int64_t n, uint32_t seed, float scale, float shift) {
  TDM_GRID_STRIDE(i, n) tc::st(p, i, hash_unit(i, seed) * scale + shift);
}

// Uniform rows, or a skewed draw (V·u³: the first row gets ~(1/V)^(1/3) of
// the positions, ~2.7 % for 50257 rows, as frequent tokens do).
__global__ void index_kernel(int32_t* idx, int64_t n, int64_t V, bool skewed, uint32_t seed) {
  TDM_GRID_STRIDE(i, n) {
    const float u = (hash_unit(i, seed) + 1.0f) * 0.5f;
    const int64_t row = int64_t((skewed ? u * u * u : u) * float(V));
    idx[i] = int32_t(row < V ? row : V - 1);
  }
}

template <class T>
void fill(const Buffer& b, int64_t n, uint32_t seed, float scale = 1.0f, float shift = 0.0f) {
  fill_kernel<T><<<tc::grid_for(n), tc::kThreads>>>(b.as<T>(), n, seed, scale, shift);
  BENCH_CHECK(cudaGetLastError());
}

struct Gpu {
  std::string name;
  int sms = 0, major = 0, minor = 0, memory_mhz = 0, bus_bits = 0;
  double peak_gbs = 0;
};

Gpu describe(int device) {
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, device));
  Gpu g;
  g.name = prop.name;
  g.sms = prop.multiProcessorCount, g.major = prop.major, g.minor = prop.minor;
  int khz = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device));
  BENCH_CHECK(cudaDeviceGetAttribute(&g.bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  g.memory_mhz = khz / 1000;
  g.peak_gbs = 2.0 * double(khz) * 1e3 * double(g.bus_bits) / 8.0 / 1e9;  // two transfers per clock
  return g;
}

// Microseconds per launch: one warm-up, one launch to size the batch, then
// a batch of about 100 ms (3 launches with --quick) between two events.
double time_us(const std::function<void()>& launch, cudaStream_t stream, bool quick) {
  cudaEvent_t a, b;
  BENCH_CHECK(cudaEventCreate(&a));
  BENCH_CHECK(cudaEventCreate(&b));
  launch();
  BENCH_CHECK(cudaEventRecord(a, stream));
  launch();
  BENCH_CHECK(cudaEventRecord(b, stream));
  BENCH_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  BENCH_CHECK(cudaEventElapsedTime(&ms, a, b));
  const int iters = quick ? 3 : std::max(5, std::min(500, int(100.0f / std::max(ms, 1e-3f))));
  BENCH_CHECK(cudaEventRecord(a, stream));
  for (int i = 0; i < iters; ++i) launch();
  BENCH_CHECK(cudaEventRecord(b, stream));
  BENCH_CHECK(cudaEventSynchronize(b));
  BENCH_CHECK(cudaGetLastError());
  BENCH_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return double(ms) * 1e3 / iters;
}

struct Row {
  std::string kernel, shape, dtype;
  double bytes = 0, old_us = 0, new_us = 0;
  bool repeatable = false;
};

// Every float of `a` and `b` (storage T) within 1e-3 of each other,
// relative to 1 + |b|, plus one unit in the last place of a 2-byte T: the
// two kernels sum in different orders in f32, and two sums a hair apart can
// round to neighbouring bf16 values, which lie 2^-8 to 2^-7 of |b| apart
// (|b|·2^-7 covers both).
template <class T>
bool agree(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, std::string& why) {
  const size_t n = a.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    T x, y;
    std::memcpy(&x, a.data() + i * sizeof(T), sizeof(T));
    std::memcpy(&y, b.data() + i * sizeof(T), sizeof(T));
    const float fx = mm::to_float(x), fy = mm::to_float(y);
    const float last_place = sizeof(T) == 2 ? std::ldexp(std::fabs(fy), -7) : 0.0f;
    if (!(std::fabs(fx - fy) <= 1e-3f * (1.0f + std::fabs(fy)) + last_place)) {
      why = "element " + std::to_string(i) + ": new " + std::to_string(fx) + ", old " + std::to_string(fy);
      return false;
    }
  }
  return true;
}

// Times old and new, after checking that new repeats its bits and agrees
// with old. `out` is what both write.
template <class T>
Row measure(Row row, const std::function<void()>& old_launch, const std::function<void()>& new_launch,
            const Buffer& out, bool bitwise_equal, cudaStream_t stream, bool quick) {
  new_launch();
  const auto first = out.read();
  new_launch();
  row.repeatable = out.read() == first;
  old_launch();
  const auto old = out.read();
  std::string why;
  if (bitwise_equal ? old != first : !agree<T>(first, old, why))
    throw std::runtime_error(row.kernel + " " + row.shape + " " + row.dtype +
                             ": new and old kernels disagree" + (why.empty() ? "" : " at " + why));
  row.old_us = time_us(old_launch, stream, quick);
  row.new_us = time_us(new_launch, stream, quick);
  return row;
}

const char* name_of(tdm_dtype t) {
  return t == TDM_F32 ? "f32" : "bf16";
}

template <class T>
Row norm_params(bool layer_norm, int64_t rows, int64_t D, bool quick) {
  const cudaStream_t s = nullptr;
  const size_t e = sizeof(T);
  Buffer dy(size_t(rows * D) * e), x(size_t(rows * D) * e), mean(size_t(rows) * 4), rstd(size_t(rows) * 4);
  Buffer out(size_t(2 * D) * e);  // dgamma then dbeta
  fill<T>(dy, rows * D, 1), fill<T>(x, rows * D, 2, 2.0f), fill<float>(mean, rows, 3, 0.1f);
  fill<float>(rstd, rows, 4, 0.3f, 1.0f);
  const mm::ColumnSumPlan plan = mm::column_sum_plan(rows, D);
  Buffer scratch(tc::column_sum_workspace<2>(plan));
  T* dgamma = out.as<T>();
  T* dbeta = dgamma + D;
  Row row{layer_norm ? "layer_norm dgamma+dbeta" : "rms_norm dgamma",
          std::to_string(rows) + " x " + std::to_string(D),
          name_of(std::is_same_v<T, float> ? TDM_F32 : TDM_BF16)};
  row.bytes = double(2 * rows * D) * double(e) + double((layer_norm ? 2 : 1) * rows) * 4 +
              double((layer_norm ? 2 : 1) * D) * double(e);
  if (layer_norm)
    return measure<T>(
        row,
        [&] {
          tc::baseline::layer_norm_dparams_kernel<T><<<tc::grid_for(D), tc::kThreads, 0, s>>>(
              dy.as<T>(), x.as<T>(), mean.as<float>(), rstd.as<float>(), dgamma, dbeta, rows, D);
        },
        [&] {
          tc::launch_column_sums(
              plan, mm::LayerNormParamTerm<T>{dy.as<T>(), x.as<T>(), mean.as<float>(), rstd.as<float>(), D},
              tc::ColumnOutputs<T, 2>{{dgamma, dbeta}}, scratch.as<void>(), s);
        },
        out, false, s, quick);
  BENCH_CHECK(cudaMemset(dbeta, 0, size_t(D) * e));  // rms_norm writes dgamma only
  return measure<T>(
      row,
      [&] {
        tc::baseline::rms_norm_dgamma_kernel<T>
            <<<unsigned((D + tc::baseline::kCols - 1) / tc::baseline::kCols),
               dim3(tc::baseline::kCols, tc::baseline::kRowSplit), 0, s>>>(dy.as<T>(), x.as<T>(),
                                                                           rstd.as<float>(), dgamma, rows, D);
      },
      [&] {
        tc::launch_column_sums(plan, mm::RmsNormParamTerm<T>{dy.as<T>(), x.as<T>(), rstd.as<float>(), D},
                               tc::ColumnOutputs<T, 1>{{dgamma}}, scratch.as<void>(), s);
      },
      out, false, s, quick);
}

Row channel_sum(int64_t outer, int64_t channels, int64_t inner, bool quick) {
  const cudaStream_t s = nullptr;
  const int64_t n = outer * channels * inner;
  Buffer dy(size_t(n) * 4), out(size_t(channels) * 4);
  fill<float>(dy, n, 5, 1.0f, 0.1f);
  const mm::ChannelSumPlan plan = mm::channel_sum_plan(outer, channels, inner);
  Buffer scratch(plan.workspace_bytes());
  Row row{inner == 1 ? "dbias (linear)" : "dbias (conv2d)",
          std::to_string(outer) + " x " + std::to_string(channels) +
              (inner == 1 ? "" : " x " + std::to_string(inner)),
          "f32"};
  row.bytes = double(n + channels) * 4;
  return measure<float>(
      row,
      [&] {
        tc::baseline::channel_sum_kernel<float><<<unsigned(channels), tc::kThreads, 0, s>>>(
            dy.as<float>(), out.as<float>(), outer, channels, inner);
      },
      [&] { tc::launch_channel_sums(plan, dy.as<float>(), out.as<float>(), scratch.as<void>(), s); }, out,
      false, s, quick);
}

Row embedding_grad(int64_t n, int64_t V, int64_t D, bool skewed, bool quick) {
  const cudaStream_t s = nullptr;
  Buffer dy(size_t(n * D) * 4), idx(size_t(n) * 4), out(size_t(V * D) * 4);
  fill<float>(dy, n * D, 6);
  index_kernel<<<tc::grid_for(n), tc::kThreads>>>(idx.as<int32_t>(), n, V, skewed, 7);
  BENCH_CHECK(cudaGetLastError());
  const tc::EmbeddingGradShape shape{n, V, D, 0, -1};
  size_t sort_bytes = 0;
  BENCH_CHECK(
      tc::embedding_grad_sort_bytes(n, mm::embedding_key_bits(mm::embedding_sentinel(V)), sort_bytes));
  const mm::EmbeddingGradLayout layout = mm::embedding_grad_layout(n, sort_bytes);
  Buffer scratch(layout.bytes);
  Row row{std::string("embedding_grad ") + (skewed ? "(skewed)" : "(uniform)"),
          std::to_string(n) + " of " + std::to_string(V) + " x " + std::to_string(D), "f32"};
  row.bytes = double(n * D + n + V * D) * 4;
  return measure<float>(
      row,
      [&] {
        BENCH_CHECK(tc::baseline::launch_embedding_grad(dy.as<float>(), idx.as<int32_t>(), out.as<float>(), n,
                                                        V, D, s));
      },
      [&] {
        BENCH_CHECK(tc::launch_embedding_grad(shape, dy.as<float>(), idx.as<int32_t>(), out.as<float>(),
                                              scratch.as<void>(), layout, sort_bytes, s));
      },
      out, true, s, quick);
}

void print(const Gpu& g, const std::vector<Row>& rows) {
  std::printf("GPU: %s (sm_%d%d, %d SMs), peak memory bandwidth %.0f GB/s (%d MHz x %d-bit x 2)\n",
              g.name.c_str(), g.major, g.minor, g.sms, g.peak_gbs, g.memory_mhz, g.bus_bits);
  std::printf("%-28s %-26s %-5s %10s %9s %6s %10s %9s %6s %8s %s\n", "kernel", "shape", "dtype", "old us",
              "old GB/s", "old %", "new us", "new GB/s", "new %", "speedup", "same bits twice");
  for (const Row& r : rows) {
    const double old_gbs = r.bytes / r.old_us * 1e-3, new_gbs = r.bytes / r.new_us * 1e-3;
    std::printf("%-28s %-26s %-5s %10.1f %9.0f %5.1f%% %10.1f %9.0f %5.1f%% %7.1fx %s\n", r.kernel.c_str(),
                r.shape.c_str(), r.dtype.c_str(), r.old_us, old_gbs, 100 * old_gbs / g.peak_gbs, r.new_us,
                new_gbs, 100 * new_gbs / g.peak_gbs, r.old_us / r.new_us, r.repeatable ? "yes" : "NO");
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int device = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--device" && i + 1 < argc) {
      device = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: gpu_kernels [--quick] [--device N]\n");
      return a == "--help" || a == "-h" ? 0 : kExitUsage;
    }
  }
  int count = 0;
  const cudaError_t found = cudaGetDeviceCount(&count);
  if (found != cudaSuccess || count == 0) {
    std::printf("gpu_kernels: no usable GPU (%s); nothing measured\n",
                found != cudaSuccess ? cudaGetErrorString(found) : "no CUDA device");
    return kExitNoGpu;
  }
  if (device < 0 || device >= count) {
    std::fprintf(stderr, "gpu_kernels: --device %d: this machine has %d GPU(s)\n", device, count);
    return kExitUsage;
  }
  try {
    BENCH_CHECK(cudaSetDevice(device));
    const Gpu gpu = describe(device);
    std::vector<Row> rows;
    const int64_t tokens = quick ? 1000 : 8192;
    const std::vector<int64_t> widths =
        quick ? std::vector<int64_t>{300} : std::vector<int64_t>{768, 1024, 4096};
    for (const bool layer_norm : {true, false})
      for (const int64_t D : widths) {
        rows.push_back(norm_params<float>(layer_norm, tokens, D, quick));
        rows.push_back(norm_params<mm::bf16_t>(layer_norm, tokens, D, quick));
      }
    for (const int64_t C : widths) rows.push_back(channel_sum(tokens, C, 1, quick));
    rows.push_back(quick ? channel_sum(4, 8, 49, quick) : channel_sum(32, 64, 56 * 56, quick));
    for (const bool skewed : {false, true})
      rows.push_back(quick ? embedding_grad(500, 1000, 64, skewed, quick)
                           : embedding_grad(8192, 50257, 768, skewed, quick));
    print(gpu, rows);
    for (const Row& r : rows)
      if (!r.repeatable) {
        std::fprintf(stderr, "gpu_kernels: %s %s %s gave other bits on a second launch\n", r.kernel.c_str(),
                     r.shape.c_str(), r.dtype.c_str());
        return kExitFailed;
      }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_kernels: %s\n", e.what());
    return kExitFailed;
  }
  return 0;
}
