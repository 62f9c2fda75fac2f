// The built CUDA plugin, loaded the way the host loads it. Loading and the
// "no device" answer are checked on every machine; the GPU tests compare
// results with naive CPU loops and the shared math headers, and report
// SKIPPED with the plugin's own reason where no GPU is usable.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "gpu_harness.hpp"
#include "math/dropout.hpp"
#include "math/optim.hpp"
#include "math/reduce_plan.hpp"
#include "plugin_test_support.hpp"

using namespace cudatest;

TEST(CudaPlugin, LoadsAndDescribesItself) {
  const tdm_plugin& d = plugin().descriptor();
  EXPECT_STREQ(d.name, "cuda");
  EXPECT_EQ(d.kind, TDM_PLUGIN_BACKEND);
  ASSERT_NE(d.backend, nullptr);
  bool cudnn = false;
  for (size_t i = 0; i < d.n_vendors; ++i) cudnn = cudnn || std::string(d.vendors[i].name) == "cuDNN";
  EXPECT_TRUE(cudnn);
  EXPECT_NE(d.backend->stream_native_handle, nullptr);
  EXPECT_NE(d.backend->memory_stats, nullptr);
}

TEST(CudaPlugin, DeviceCountExplainsAMissingDriver) {
  uint32_t count = 7;
  const tdm_status s = plugin().api().device_count(&count);
  if (s == TDM_OK) GTEST_SKIP() << "this machine has a working CUDA driver (" << count << " GPU(s))";
  EXPECT_EQ(s, TDM_UNAVAILABLE);
  EXPECT_EQ(count, 0u);
  // The runtime's own reason, worded for a user (the host prefixes "cuda: no device").
  EXPECT_NE(Plugin::last_error().find("CUDA"), std::string::npos) << Plugin::last_error();
}

// Listing the GPUs (`tandem devices`, choosing a rank's device) opens and
// describes every one: that must not create this process's CUDA context on
// any of them, or every rank of a node would hold a context on every GPU.
// The driver says whether a GPU's primary context is active.
TEST(CudaPlugin, DescribingEveryGpuCreatesNoContext) {
  uint32_t count = 0;
  if (plugin().api().device_count(&count) != TDM_OK || count == 0)
    GTEST_SKIP() << "no usable GPU: " << Plugin::last_error();
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(driver, nullptr) << dlerror();
  using Init = int (*)(unsigned);
  using Get = int (*)(int*, int);
  using State = int (*)(int, unsigned*, int*);
  const auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
  const auto get = reinterpret_cast<Get>(dlsym(driver, "cuDeviceGet"));
  const auto state = reinterpret_cast<State>(dlsym(driver, "cuDevicePrimaryCtxGetState"));
  ASSERT_TRUE(init && get && state);
  ASSERT_EQ(init(0), 0);
  for (uint32_t i = 0; i < count; ++i) {
    tdm_device* device = nullptr;
    ASSERT_EQ(plugin().api().device_open(i, &device), TDM_OK) << Plugin::last_error();
    tdm_device_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(plugin().api().device_info(device, &info), TDM_OK) << Plugin::last_error();
    EXPECT_GT(info.total_memory, 0u);
    EXPECT_GT(info.free_memory, 0u) << "GPU " << i << ": free memory not reported";
    EXPECT_LE(info.free_memory, info.total_memory);
  }
  for (uint32_t i = 0; i < count; ++i) {
    int device = -1, active = -1;
    unsigned flags = 0;
    ASSERT_EQ(get(&device, int(i)), 0);
    ASSERT_EQ(state(device, &flags, &active), 0);
    EXPECT_EQ(active, 0) << "describing GPU " << i << " created a CUDA context on it";
  }
}

TEST_F(Gpu, DeviceInfoAndMemoryStatistics) {
  tdm_device_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(p_->api().device_info(p_->device(), &info), TDM_OK);
  EXPECT_EQ(info.kind, TDM_DEVICE_GPU);
  EXPECT_GT(info.total_memory, info.free_memory);
  void* a = nullptr;
  ASSERT_EQ(p_->api().mem_alloc(p_->device(), 3000, &a), TDM_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  p_->api().mem_free(p_->device(), a);
  void* b = nullptr;
  ASSERT_EQ(p_->api().mem_alloc(p_->device(), 2900, &b), TDM_OK);
  EXPECT_EQ(a, b);  // reused from the cache
  tdm_memory_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(p_->api().memory_stats(p_->device(), &st), TDM_OK);
  EXPECT_GE(st.allocated, 3072u);
  p_->api().mem_free(p_->device(), b);
  ASSERT_EQ(p_->api().memory_release_cached(p_->device()), TDM_OK);
  ASSERT_EQ(p_->api().memory_stats(p_->device(), &st), TDM_OK);
  EXPECT_EQ(st.largest_free_block, 0u);
  EXPECT_NE(p_->api().stream_native_handle(p_->stream()), nullptr);
}

TEST_F(Gpu, OutOfMemoryNamesTheSizeAndFreeMemory) {
  void* p = nullptr;
  EXPECT_EQ(p_->api().mem_alloc(p_->device(), size_t(1) << 50, &p), TDM_OUT_OF_MEMORY);
  EXPECT_NE(Plugin::last_error().find("1125899906842624 bytes"), std::string::npos) << Plugin::last_error();
  EXPECT_NE(Plugin::last_error().find("free"), std::string::npos);
}

TEST_F(Gpu, MatmulBatchedAndTransposedMatchesNaiveLoops) {
  const int64_t B = 3, M = 5, K = 7, N = 4;
  const auto a = ramp(B * K * M), b = ramp(K * N, 0.05f, 1.0f);  // a transposed, b broadcast
  std::vector<Tensor> out = {Tensor::empty(TDM_F32, {B, M, N})};
  ASSERT_EQ(p_->run("matmul", {Attr::integer("transpose_a", 1)},
                    {Tensor::f32({B, K, M}, a), Tensor::f32({K, N}, b)}, out),
            TDM_OK)
      << Plugin::last_error();
  // b is shared by every batch: one strided-batched call with b's stride 0.
  EXPECT_NE(p_->implementation().find("cublasGemmStridedBatchedEx"), std::string::npos)
      << p_->implementation();
  const auto y = out[0].floats();
  for (int64_t z = 0; z < B; ++z)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += double(a[size_t((z * K + k) * M + i)]) * b[size_t(k * N + j)];
        EXPECT_NEAR(y[size_t((z * M + i) * N + j)], acc, 1e-4);
      }
}

TEST_F(Gpu, MatmulOverAnEmptySumIsZero) {
  // K = 0: cuBLAS refuses the leading dimensions, the plugin writes zeros.
  std::vector<Tensor> out = {Tensor::f32({2, 3}, std::vector<float>(6, 7.0f))};
  ASSERT_EQ(p_->run("matmul", {}, {Tensor::f32({2, 0}, {}), Tensor::f32({0, 3}, {})}, out), TDM_OK)
      << Plugin::last_error();
  for (float y : out[0].floats()) EXPECT_EQ(y, 0.0f);
}

TEST_F(Gpu, LinearWithBiasAndReluAndItsWeightGradient) {
  const int64_t N = 6, I = 5, O = 3;
  const auto x = ramp(N * I), w = ramp(O * I, 0.07f, 0.5f), bias = ramp(O, 0.1f, 2.0f);
  std::vector<Tensor> out = {Tensor::empty(TDM_F32, {N, O})};
  ASSERT_EQ(p_->run("linear", {Attr::text("activation", "relu")},
                    {Tensor::f32({N, I}, x), Tensor::f32({O, I}, w), Tensor::f32({O}, bias)}, out),
            TDM_OK)
      << Plugin::last_error();
  const auto y = out[0].floats();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double acc = bias[size_t(o)];
      for (int64_t i = 0; i < I; ++i) acc += double(x[size_t(n * I + i)]) * w[size_t(o * I + i)];
      EXPECT_NEAR(y[size_t(n * O + o)], acc > 0 ? acc : 0.0, 1e-5);
    }
  const auto dy = ramp(N * O, 0.2f);
  std::vector<Tensor> grads = {Tensor::empty(TDM_F32, {O, I}), Tensor::empty(TDM_F32, {O})};
  ASSERT_EQ(p_->run("linear_grad_weight", {}, {Tensor::f32({N, O}, dy), Tensor::f32({N, I}, x)}, grads),
            TDM_OK)
      << Plugin::last_error();
  const auto dw = grads[0].floats(), db = grads[1].floats();
  for (int64_t o = 0; o < O; ++o) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) s += dy[size_t(n * O + o)];
    EXPECT_NEAR(db[size_t(o)], s, 1e-5);
    for (int64_t i = 0; i < I; ++i) {
      double acc = 0;
      for (int64_t n = 0; n < N; ++n) acc += double(dy[size_t(n * O + o)]) * x[size_t(n * I + i)];
      EXPECT_NEAR(dw[size_t(o * I + i)], acc, 1e-5);
    }
  }
}

TEST_F(Gpu, Conv2dMatchesNaiveLoops) {
  const int64_t N = 2, C = 3, H = 6, W = 5, K = 4, R = 3, S = 3, P = 3, Q = 3;  // stride 2, padding 1
  const auto x = ramp(N * C * H * W), w = ramp(K * C * R * S, 0.05f), b = ramp(K, 0.1f, 3.0f);
  std::vector<Tensor> out = {Tensor::empty(TDM_F32, {N, K, P, Q})};
  size_t ws = 0;
  ASSERT_EQ(
      p_->run("conv2d", {Attr::list("stride", {2, 2}), Attr::list("padding", {1, 1})},
              {Tensor::f32({N, C, H, W}, x), Tensor::f32({K, C, R, S}, w), Tensor::f32({K}, b)}, out, &ws),
      TDM_OK)
      << Plugin::last_error();
  const auto y = out[0].floats();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          double acc = b[size_t(k)];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t h = p * 2 - 1 + r, v = q * 2 - 1 + s;
                if (h < 0 || h >= H || v < 0 || v >= W) continue;
                acc += double(x[size_t(((n * C + c) * H + h) * W + v)]) *
                       w[size_t(((k * C + c) * R + r) * S + s)];
              }
          EXPECT_NEAR(y[size_t(((n * K + k) * P + p) * Q + q)], acc, 1e-4);
        }
}

// Both gradients, on cuDNN's graph API (the default, cuda.conv_api=graph):
// the kernels say they run a graph engine, and match the naive sums.
TEST_F(Gpu, Conv2dGradientsRunAsCudnnGraphsAndMatchNaiveLoops) {
  const int64_t N = 2, C = 3, H = 6, W = 5, K = 4, R = 3, S = 3, P = 3, Q = 3;  // stride 2, padding 1
  const std::vector<Attr> attrs = {Attr::list("stride", {2, 2}), Attr::list("padding", {1, 1})};
  const auto x = ramp(N * C * H * W), w = ramp(K * C * R * S, 0.05f), dy = ramp(N * K * P * Q, 0.07f, 0.3f);
  std::vector<double> dx_want(size_t(N * C * H * W)), dw_want(size_t(K * C * R * S));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q)
          for (int64_t c = 0; c < C; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t h = p * 2 - 1 + r, v = q * 2 - 1 + s;
                if (h < 0 || h >= H || v < 0 || v >= W) continue;
                const size_t xi = size_t(((n * C + c) * H + h) * W + v),
                             wi = size_t(((k * C + c) * R + r) * S + s);
                const double g = dy[size_t(((n * K + k) * P + p) * Q + q)];
                dx_want[xi] += g * w[wi];
                dw_want[wi] += g * x[xi];
              }
  std::vector<Tensor> dx = {Tensor::empty(TDM_F32, {N, C, H, W})};
  ASSERT_EQ(
      p_->run("conv2d_grad_input", attrs, {Tensor::f32({N, K, P, Q}, dy), Tensor::f32({K, C, R, S}, w)}, dx),
      TDM_OK)
      << Plugin::last_error();
  EXPECT_NE(p_->implementation().find("cudnn graph engine"), std::string::npos) << p_->implementation();
  for (size_t i = 0; i < dx_want.size(); ++i) EXPECT_NEAR(dx[0].floats()[i], dx_want[i], 1e-4) << i;
  std::vector<Tensor> dw = {Tensor::empty(TDM_F32, {K, C, R, S})};
  ASSERT_EQ(
      p_->run("conv2d_grad_weight", attrs, {Tensor::f32({N, K, P, Q}, dy), Tensor::f32({N, C, H, W}, x)}, dw),
      TDM_OK)
      << Plugin::last_error();
  EXPECT_NE(p_->implementation().find("cudnn graph engine"), std::string::npos) << p_->implementation();
  for (size_t i = 0; i < dw_want.size(); ++i) EXPECT_NEAR(dw[0].floats()[i], dw_want[i], 1e-4) << i;
}

TEST_F(Gpu, MaxPoolTiesGoToTheFirstMaximum) {
  // One 2x2 window of equal values: the first (row-major) gets the gradient.
  std::vector<Tensor> out = {Tensor::empty(TDM_F32, {1, 1, 1, 1})};
  const Tensor x = Tensor::f32({1, 1, 2, 2}, {5, 5, 5, 5});
  ASSERT_EQ(p_->run("max_pool2d", {Attr::list("kernel", {2, 2})}, {x}, out), TDM_OK) << Plugin::last_error();
  EXPECT_EQ(out[0].floats()[0], 5.0f);
  std::vector<Tensor> dx = {Tensor::empty(TDM_F32, {1, 1, 2, 2})};
  ASSERT_EQ(
      p_->run("max_pool2d_grad", {Attr::list("kernel", {2, 2})}, {Tensor::f32({1, 1, 1, 1}, {3}), x}, dx),
      TDM_OK)
      << Plugin::last_error();
  EXPECT_EQ(dx[0].floats(), (std::vector<float>{3, 0, 0, 0}));
}

TEST_F(Gpu, DropoutMaskIsTheCatalogHash) {
  const int64_t n = 10000;
  const double p = 0.3;
  const auto x = ramp(n);
  std::vector<Tensor> out = {Tensor::empty(TDM_F32, {n}), Tensor::empty(TDM_U8, {n})};
  ASSERT_EQ(p_->run("dropout", {Attr::real("p", p), Attr::integer("seed", 1234)}, {Tensor::f32({n}, x)}, out),
            TDM_OK)
      << Plugin::last_error();
  const auto y = out[0].floats();
  const uint32_t t = tandem::cuda::math::dropout_threshold(p);
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = tandem::cuda::math::dropout_keep(1234, uint64_t(i), t);
    ASSERT_EQ(out[1].bytes[size_t(i)], keep ? 1 : 0) << i;
    EXPECT_EQ(y[size_t(i)], keep ? x[size_t(i)] / float(1.0 - p) : 0.0f);
  }
}

TEST_F(Gpu, SoftmaxCrossEntropyWithIgnoredRow) {
  const std::vector<float> logits = {1, 2, 3, 0, 0, 0, -1, 5, 2};
  std::vector<Tensor> out = {Tensor::empty(TDM_F32, {})};
  ASSERT_EQ(p_->run("softmax_cross_entropy", {},
                    {Tensor::f32({3, 3}, logits), Tensor::s32({3}, {2, -100, 1})}, out),
            TDM_OK)
      << Plugin::last_error();
  const double l0 = std::log(std::exp(1) + std::exp(2) + std::exp(3)) - 3;
  const double l2 = std::log(std::exp(-1) + std::exp(5) + std::exp(2)) - 5;
  EXPECT_NEAR(out[0].floats()[0], (l0 + l2) / 2, 1e-5);
}

TEST_F(Gpu, LayerNormReduceTransposeConcat) {
  const auto x = ramp(12);
  std::vector<Tensor> ln = {Tensor::empty(TDM_F32, {3, 4}), Tensor::empty(TDM_F32, {3}),
                            Tensor::empty(TDM_F32, {3})};
  ASSERT_EQ(
      p_->run("layer_norm", {},
              {Tensor::f32({3, 4}, x), Tensor::f32({4}, {1, 1, 1, 1}), Tensor::f32({4}, {0, 0, 0, 0})}, ln),
      TDM_OK)
      << Plugin::last_error();
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int j = 0; j < 4; ++j) s += ln[0].floats()[size_t(r * 4 + j)];
    EXPECT_NEAR(s, 0.0, 1e-5);
  }
  std::vector<Tensor> red = {Tensor::empty(TDM_F32, {4})};
  ASSERT_EQ(p_->run("reduce_sum", {Attr::list("axes", {0})}, {Tensor::f32({3, 4}, x)}, red), TDM_OK);
  for (int j = 0; j < 4; ++j)
    EXPECT_NEAR(red[0].floats()[size_t(j)], x[size_t(j)] + x[size_t(4 + j)] + x[size_t(8 + j)], 1e-6);
  std::vector<Tensor> tr = {Tensor::empty(TDM_F32, {4, 3})};
  ASSERT_EQ(p_->run("transpose", {}, {Tensor::f32({3, 4}, x)}, tr), TDM_OK);
  EXPECT_EQ(tr[0].floats()[1], x[4]);
  std::vector<Tensor> cat = {Tensor::empty(TDM_F32, {3, 6})};
  ASSERT_EQ(p_->run("concat", {Attr::integer("axis", 1)},
                    {Tensor::f32({3, 4}, x), Tensor::f32({3, 2}, {9, 8, 7, 6, 5, 4})}, cat),
            TDM_OK)
      << Plugin::last_error();
  EXPECT_EQ(cat[0].floats()[4], 9.0f);
  EXPECT_EQ(cat[0].floats()[6], x[4]);
}

// Sums with few outputs and many elements each are split over blocks and
// folded in a second stage (math/reduce_plan.hpp): a whole-tensor sum and
// mean, and a sum over the leading axis; the same bits on a second run.
TEST_F(Gpu, LargeSumsSplitOverBlocksMatchSumsInDouble) {
  const int64_t n = 300000, cols = 3;
  const auto x = ramp(n);
  ASSERT_GT(mm::reduce_plan(1, n).splits, 1);
  ASSERT_GT(mm::reduce_plan(cols, n / cols).splits, 1);
  // Each result is at most ~40 roundings deep (≤ 17 elements per thread, two
  // 8-level trees, ≤ 4 partials per thread): within 40·ε/2 of Σ|x|.
  const double bound = 40 * 0.5 * std::numeric_limits<float>::epsilon();
  double whole = 0, abs_whole = 0;
  for (float v : x) whole += v, abs_whole += std::fabs(v);
  for (const char* op : {"reduce_sum", "reduce_mean"}) {
    std::vector<Tensor> first = {Tensor::empty(TDM_F32, {})}, second = first;
    size_t workspace = 0;
    ASSERT_EQ(p_->run(op, {}, {Tensor::f32({n}, x)}, first, &workspace), TDM_OK) << Plugin::last_error();
    EXPECT_EQ(workspace, mm::reduce_plan(1, n).splits * sizeof(float)) << op;
    ASSERT_EQ(p_->run(op, {}, {Tensor::f32({n}, x)}, second), TDM_OK) << Plugin::last_error();
    const double divisor = std::string(op) == "reduce_mean" ? double(n) : 1.0;
    EXPECT_NEAR(first[0].floats()[0], whole / divisor, bound * abs_whole / divisor) << op;
    EXPECT_EQ(first[0].floats()[0], second[0].floats()[0]) << op << ": another run, other bits";
  }
  std::vector<Tensor> columns = {Tensor::empty(TDM_F32, {cols})};
  ASSERT_EQ(p_->run("reduce_sum", {Attr::list("axes", {0})}, {Tensor::f32({n / cols, cols}, x)}, columns),
            TDM_OK)
      << Plugin::last_error();
  for (int64_t j = 0; j < cols; ++j) {
    double sum = 0, abs_sum = 0;
    for (int64_t r = 0; r < n / cols; ++r)
      sum += x[size_t(r * cols + j)], abs_sum += std::fabs(x[size_t(r * cols + j)]);
    EXPECT_NEAR(columns[0].floats()[size_t(j)], sum, bound * abs_sum) << "column " << j;
  }
}

TEST_F(Gpu, AdamwMatchesTheSharedMath) {
  const int64_t n = 257;
  const auto w = ramp(n), g = ramp(n, 0.3f), m = ramp(n, 0.01f), v = std::vector<float>(size_t(n), 0.01f);
  std::vector<Tensor> out = {Tensor::empty(TDM_F32, {n}), Tensor::empty(TDM_F32, {n}),
                             Tensor::empty(TDM_F32, {n})};
  ASSERT_EQ(p_->run("adamw_update", {},
                    {Tensor::f32({n}, w), Tensor::f32({n}, g), Tensor::f32({n}, m), Tensor::f32({n}, v),
                     Tensor::f32({}, {0.001f}), Tensor::s32({}, {3})},
                    out),
            TDM_OK)
      << Plugin::last_error();
  namespace mm = tandem::cuda::math;
  const auto a = mm::adamw_params(0.9, 0.999, 1e-8, 0.01);
  for (int64_t i = 0; i < n; ++i) {
    float pw = w[size_t(i)], pm = m[size_t(i)], pv = v[size_t(i)];
    mm::adamw_step(a, mm::bias_correction(a, 3), 0.001f, pw, g[size_t(i)], pm, pv);
    EXPECT_NEAR(out[0].floats()[size_t(i)], pw, 1e-6);
  }
}

TEST_F(Gpu, EmbeddingGradientAccumulatesRepeatedIndices) {
  std::vector<Tensor> out = {Tensor::empty(TDM_F32, {3, 2})};
  ASSERT_EQ(p_->run("embedding_grad", {Attr::integer("padding_idx", 0)},
                    {Tensor::f32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), Tensor::s32({4}, {1, 1, 0, 2})}, out),
            TDM_OK)
      << Plugin::last_error();
  EXPECT_EQ(out[0].floats(), (std::vector<float>{0, 0, 4, 6, 7, 8}));
}

TEST_F(Gpu, RopeAnglesStayExactFarAlongTheContext) {
  // At position 2^20 an angle formed in f32 would be off by ~0.06 rad.
  const int64_t T = 2, D = 8, offset = (int64_t(1) << 20) + 3;
  const auto x = ramp(T * D);
  Tensor pos{TDM_S64, {}, std::vector<uint8_t>(sizeof offset)};
  std::memcpy(pos.bytes.data(), &offset, sizeof offset);
  std::vector<Tensor> out = {Tensor::empty(TDM_F32, {T, D})};
  ASSERT_EQ(p_->run("rope", {}, {Tensor::f32({T, D}, x), pos}, out), TDM_OK) << Plugin::last_error();
  const auto y = out[0].floats();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < D / 2; ++i) {
      const double theta = double(offset + t) * std::pow(10000.0, -2.0 * double(i) / double(D));
      const double lo = x[size_t(t * D + i)], hi = x[size_t(t * D + i + D / 2)];
      EXPECT_NEAR(y[size_t(t * D + i)], lo * std::cos(theta) - hi * std::sin(theta), 1e-5) << t << " " << i;
      EXPECT_NEAR(y[size_t(t * D + i + D / 2)], hi * std::cos(theta) + lo * std::sin(theta), 1e-5);
    }
}

TEST_F(Gpu, AttentionDeclinesHeadDimsAbove128) {
  const int64_t D = 136;
  std::vector<Tensor> out = {Tensor::empty(TDM_F32, {1, 1, 2, 8}), Tensor::empty(TDM_F32, {1, 1, 2})};
  EXPECT_EQ(p_->run("attention", {},
                    {Tensor::f32({1, 1, 2, D}, ramp(2 * D)), Tensor::f32({1, 1, 2, D}, ramp(2 * D)),
                     Tensor::f32({1, 1, 2, 8}, ramp(16))},
                    out),
            TDM_UNSUPPORTED);
  EXPECT_NE(Plugin::last_error().find("128"), std::string::npos) << Plugin::last_error();
}

TEST_F(Gpu, DeclinesF64AsANormalAnswer) {
  Tensor x{TDM_F64, {2}, std::vector<uint8_t>(16)};
  std::vector<Tensor> out = {Tensor::empty(TDM_F64, {2})};
  EXPECT_EQ(p_->run("relu", {}, {x}, out), TDM_UNSUPPORTED);
  EXPECT_EQ(p_->run("no_such_op", {}, {x}, out), TDM_UNSUPPORTED);
}

// ABI 1.7: GPU 0 copies straight into GPU 1 where the two allow peer access,
// on GPU 0's stream; GPU 1's stream waits on GPU 0's event (rule 26).
TEST_F(Gpu, PeerCopyBetweenTwoGpus) {
  uint32_t count = 0;
  ASSERT_EQ(p_->api().device_count(&count), TDM_OK);
  if (count < 2) GTEST_SKIP() << "needs two GPUs, this machine has " << count;
  tdm_device* other = nullptr;
  ASSERT_EQ(p_->api().device_open(1, &other), TDM_OK) << Plugin::last_error();
  int32_t yes = -1;
  ASSERT_EQ(p_->api().peer_access(p_->device(), other, &yes), TDM_OK) << Plugin::last_error();
  if (yes == 0) GTEST_SKIP() << "GPUs 0 and 1 have no peer access (cudaDeviceCanAccessPeer)";
  ASSERT_EQ(p_->api().peer_access(p_->device(), other, &yes), TDM_OK) << "asking twice must be harmless";
  const std::vector<float> v = ramp(1 << 20);
  const size_t bytes = v.size() * sizeof(float);
  void *src = nullptr, *dst = nullptr;
  ASSERT_EQ(p_->api().mem_alloc(p_->device(), bytes, &src), TDM_OK);
  ASSERT_EQ(p_->api().mem_alloc(other, bytes, &dst), TDM_OK);
  tdm_stream* other_stream = nullptr;
  tdm_event* copied = nullptr;
  ASSERT_EQ(p_->api().stream_create(other, &other_stream), TDM_OK);
  ASSERT_EQ(p_->api().event_create(p_->device(), &copied), TDM_OK);
  ASSERT_EQ(p_->api().copy_h2d(p_->stream(), src, v.data(), bytes), TDM_OK);
  ASSERT_EQ(p_->api().copy_peer(p_->stream(), other, dst, src, bytes), TDM_OK) << Plugin::last_error();
  ASSERT_EQ(p_->api().event_record(copied, p_->stream()), TDM_OK);
  ASSERT_EQ(p_->api().stream_wait_event(other_stream, copied), TDM_OK) << Plugin::last_error();
  std::vector<float> back(v.size());
  ASSERT_EQ(p_->api().copy_d2h(other_stream, back.data(), dst, bytes), TDM_OK);
  ASSERT_EQ(p_->api().stream_synchronize(other_stream), TDM_OK) << Plugin::last_error();
  EXPECT_EQ(std::memcmp(back.data(), v.data(), bytes), 0);
  p_->api().event_destroy(copied);
  p_->api().stream_destroy(other_stream);
  p_->api().mem_free(other, dst);
  p_->api().mem_free(p_->device(), src);
  p_->api().device_close(other);
}
