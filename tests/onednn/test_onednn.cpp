// Unit tests of the oneDNN backend for what the conformance kit cannot see:
// metadata, primitive caching (launches create no primitive and allocate no
// device memory) and the "threads" configuration. The plugin is loaded by the
// conformance kit's loader with a host table whose config_get answers
// "threads" (plugin_fixture.hpp).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "plugin_fixture.hpp"

using namespace onednn_test;

TEST(OnednnPlugin, Metadata) {
  Fixture& f = loaded();
  ASSERT_NE(f.plugin, nullptr) << last_error();
  EXPECT_STREQ(f.plugin->name, "onednn");
  ASSERT_EQ(f.plugin->n_vendors, 1u);
  EXPECT_STREQ(f.plugin->vendors[0].name, "oneDNN");
  // The plugin builds against oneDNN 2 (Debian 12) and 3 (Debian 13).
  const std::string version = f.plugin->vendors[0].version;
  EXPECT_TRUE(version.rfind("2.", 0) == 0 || version.rfind("3.", 0) == 0) << version;
  tdm_device_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(f.api->device_info(f.device, &info), TDM_OK);
  EXPECT_STREQ(info.name, "onednn:0");
  EXPECT_EQ(info.host_addressable, 1);
}

TEST(OnednnPlugin, ThreadsConfigApplied) {
  ASSERT_NE(loaded().plugin, nullptr) << last_error();
  EXPECT_EQ(omp_get_max_threads(), 1);  // the host said threads = 1
}

TEST(OnednnPlugin, LaunchesCreateNoPrimitiveAndAllocateNothing) {
  Fixture& f = loaded();
  ASSERT_NE(f.device, nullptr) << last_error();
  const std::vector<int64_t> xd{8, 32}, wd{16, 32}, bd{16}, yd{8, 16};
  tdm_tensor_desc in[3] = {desc(TDM_F32, xd), desc(TDM_F32, wd), desc(TDM_F32, bd)};
  tdm_tensor_desc out[1] = {desc(TDM_F32, yd)};
  tdm_attr act{};
  act.struct_size = sizeof act;
  act.name = "activation";
  act.type = TDM_ATTR_STRING;
  act.s = "tanh";  // relu would run on the own GEMM on an AVX2 CPU: this is about oneDNN's primitives
  tdm_op_desc op{};
  op.struct_size = sizeof op;
  op.op = "linear";
  op.op_version = 1;
  op.attrs = &act;
  op.n_attrs = 1;
  op.inputs = in;
  op.n_inputs = 3;
  op.outputs = out;
  op.n_outputs = 1;
  tdm_kernel* k1 = nullptr;
  tdm_kernel* k2 = nullptr;
  size_t ws1 = 0, ws2 = 0;
  ASSERT_EQ(f.api->kernel_prepare(f.device, &op, &k1, &ws1), TDM_OK) << last_error();
  ASSERT_EQ(f.api->kernel_prepare(f.device, &op, &k2, &ws2), TDM_OK) << last_error();
  EXPECT_NE(std::string(f.api->kernel_describe(k1)).find("onednn:linear("), std::string::npos);

  std::vector<float> x(8 * 32, 0.5f), w(16 * 32, 0.25f), b(16, -1.f), y(8 * 16, 0.f);
  std::vector<char> ws(ws1 > ws2 ? ws1 : ws2);
  void* inputs[3] = {x.data(), w.data(), b.data()};
  void* outputs[1] = {y.data()};
  tdm_memory_stats before{};
  before.struct_size = sizeof before;
  ASSERT_EQ(f.api->memory_stats(f.device, &before), TDM_OK);
  const uint64_t created = primitives_in(f.api->kernel_describe(k1));
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(f.api->kernel_launch(k1, f.stream, inputs, outputs, ws.data()), TDM_OK) << last_error();
    ASSERT_EQ(f.api->kernel_launch(k2, f.stream, inputs, outputs, ws.data()), TDM_OK) << last_error();
  }
  EXPECT_EQ(primitives_in(f.api->kernel_describe(k1)), created);
  tdm_memory_stats after{};
  after.struct_size = sizeof after;
  ASSERT_EQ(f.api->memory_stats(f.device, &after), TDM_OK);
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_FLOAT_EQ(y[0], std::tanh(32 * 0.5f * 0.25f - 1.f));  // tanh(4 - 1)
  f.api->kernel_release(k1);
  f.api->kernel_release(k2);
}

TEST(OnednnPlugin, F16MatmulIsUnsupported) {
  Fixture& f = loaded();
  ASSERT_NE(f.device, nullptr) << last_error();
  const std::vector<int64_t> d{2, 2};
  const tc::RunResult r = tc::run_op(
      *f.kit, "matmul", {}, {tc::HostTensor(TDM_F16, d), tc::HostTensor(TDM_F16, d)}, {{TDM_F16, d}});
  EXPECT_EQ(r.status, TDM_UNSUPPORTED);
  EXPECT_EQ(r.outcome.status, tc::Status::unsupported);
  EXPECT_NE(r.plugin_message.find("f16"), std::string::npos) << r.plugin_message;
}

// dx = dy·w with w's rows 4 KiB long and 64-256 batch rows: where oneDNN's
// AVX2 sgemm ("gemm:jit") is slow on w as stored, the kernel copies w into its
// transposed form first (ops/matmul_primitive.cpp); under brgemm it reads w in
// place; on an AVX2 CPU the own GEMM (ops/sgemm.hpp) takes the product
// instead, unless TANDEM_ONEDNN_OWN_SGEMM=0. Each way dx must be the product.
TEST(OnednnPlugin, GradInputOnFourKibRowsIsTheProductOnEitherPath) {
  Fixture& f = loaded();
  ASSERT_NE(f.device, nullptr) << last_error();
  const int64_t n = 128, o = 8, i = 1024;
  std::vector<double> dy(n * o), w(o * i);
  for (size_t k = 0; k < dy.size(); ++k) dy[k] = double(int(k % 13) - 6) / 8;
  for (size_t k = 0; k < w.size(); ++k) w[k] = double(int(k % 11) - 5) / 4;
  const tc::RunResult r = tc::run_op(
      *f.kit, "linear_grad_input", {},
      {tc::HostTensor::from_values(TDM_F32, {n, o}, dy), tc::HostTensor::from_values(TDM_F32, {o, i}, w)},
      {{TDM_F32, {n, i}}});
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  const bool jit_sgemm = r.implementation.find("gemm:jit") != std::string::npos;
  if (r.implementation.find("sgemm:avx2") == std::string::npos) {
    EXPECT_NE(r.implementation.find(jit_sgemm ? "reorders=1" : "reorders=0"), std::string::npos)
        << r.implementation;
  }
  const std::vector<double> dx = r.outputs[0].to_f64();
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < i; ++b) {
      double want = 0;
      for (int64_t k = 0; k < o; ++k) want += dy[a * o + k] * w[k * i + b];
      ASSERT_EQ(dx[a * i + b], want) << "dx[" << a << ", " << b << "] with "
                                     << r.implementation;  // exact: eighths
    }
}

// gelu with the tanh approximation is own code on f32 (ops/activation.cpp):
// x·σ(2u) through a saturating exp. Far out in both tails it must still be
// x (or 0) and its gradient 1 (or 0), never inf or nan.
TEST(OnednnPlugin, GeluTanhIsRightFarIntoBothTails) {
  Fixture& f = loaded();
  ASSERT_NE(f.device, nullptr) << last_error();
  const std::vector<double> xs = {-1e30, -100, -10, -3, -0.5, 0, 0.5, 3, 10, 100, 1e30};
  const int64_t n = int64_t(xs.size());
  tc::Attrs tanh;
  tanh.string("approximate", "tanh");
  const tc::HostTensor x = tc::HostTensor::from_values(TDM_F32, {n}, xs);
  const tc::RunResult y = tc::run_op(*f.kit, "gelu", tanh, {x}, {{TDM_F32, {n}}});
  ASSERT_TRUE(y.outcome.ok()) << y.outcome.message;
  const tc::RunResult dx = tc::run_op(
      *f.kit, "gelu_grad", tanh,
      {tc::HostTensor::from_values(TDM_F32, {n}, std::vector<double>(xs.size(), 1.0)), x}, {{TDM_F32, {n}}});
  ASSERT_TRUE(dx.outcome.ok()) << dx.outcome.message;
  const std::vector<double> got = y.outputs[0].to_f64(), slope = dx.outputs[0].to_f64();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i], u = std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v), t = std::tanh(u);
    const double want = 0.5 * v * (1 + t);
    const double want_slope =
        0.5 * (1 + t) + 0.5 * v * (1 - t * t) * std::sqrt(2 / M_PI) * (1 + 3 * 0.044715 * v * v);
    EXPECT_NEAR(got[i], want, 1e-6 * std::max(1.0, std::fabs(want)))
        << "gelu(" << v << ") " << y.implementation;
    EXPECT_TRUE(std::isfinite(slope[i])) << "gelu_grad at " << v;
    if (std::fabs(v) < 1e10)  // beyond, (1 − t²)·x³ is 0·inf in the formula above
      EXPECT_NEAR(slope[i], want_slope, 1e-5) << "gelu_grad at " << v << " " << dx.implementation;
    else
      EXPECT_EQ(slope[i], v > 0 ? 1.0 : 0.0) << "gelu_grad at " << v;
  }
}
