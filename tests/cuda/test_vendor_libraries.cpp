// cuBLAS, cuDNN and NCCL are opened by soname when a GPU (or communicator)
// first needs them, not linked (plugins/cuda/vendor, plugins/nccl). Without
// a GPU this still checks what can go wrong: the libraries are found (by the
// loader's paths, or the build's toolkit), every function the plugins route
// resolves in them, and calls through the routing work (the error-string
// functions need no GPU), and the convolutions' cuDNN graphs are accepted by
// the installed cuDNN as far as it goes without a GPU. A missing library is
// an error naming every file tried and the package to install.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "nccl_library.hpp"
#include "ops/conv_graph.hpp"
#include "vendor/cublas.hpp"
#include "vendor/cudnn.hpp"

namespace {

using tandem::cuda::cublas_library;
using tandem::cuda::cudnn_library;
using tandem::nccl::nccl_library;

TEST(VendorLibraries, OpenWithoutAGpuAndRouteCalls) {
  ASSERT_NO_THROW(tandem::cuda::load_vendor_libraries());
  EXPECT_NE(cublas_library().path().find("libcublas.so."), std::string::npos) << cublas_library().path();
  EXPECT_NE(cudnn_library().path().find("libcudnn.so."), std::string::npos) << cudnn_library().path();
  EXPECT_STREQ(cublasGetStatusString(CUBLAS_STATUS_SUCCESS), "success");
  EXPECT_STREQ(cudnnGetErrorString(CUDNN_STATUS_SUCCESS), "CUDNN_STATUS_SUCCESS");
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
}

// Every routed function exists in the library the plugin opens (an older
// library lacking one would fail here, not at a user's first GPU step).
TEST(VendorLibraries, EveryRoutedFunctionResolves) {
  EXPECT_NE(TANDEM_VENDOR_FN(cublas_library(), cublasCreate_v2), nullptr);
  EXPECT_NE(TANDEM_VENDOR_FN(cublas_library(), cublasDestroy_v2), nullptr);
  EXPECT_NE(TANDEM_VENDOR_FN(cublas_library(), cublasSetStream_v2), nullptr);
  EXPECT_NE(TANDEM_VENDOR_FN_AS(cublas_library(), cublasGemmStridedBatchedEx, CublasGemmStridedBatchedEx),
            nullptr);
  for (const char* fn : {"cudnnCreate",
                         "cudnnDestroy",
                         "cudnnSetStream",
                         "cudnnCreateTensorDescriptor",
                         "cudnnDestroyTensorDescriptor",
                         "cudnnSetTensor4dDescriptor",
                         "cudnnCreateFilterDescriptor",
                         "cudnnDestroyFilterDescriptor",
                         "cudnnSetFilter4dDescriptor",
                         "cudnnCreateConvolutionDescriptor",
                         "cudnnDestroyConvolutionDescriptor",
                         "cudnnSetConvolution2dDescriptor",
                         "cudnnSetConvolutionGroupCount",
                         "cudnnSetConvolutionMathType",
                         "cudnnGetConvolutionForwardAlgorithm_v7",
                         "cudnnGetConvolutionForwardWorkspaceSize",
                         "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                         "cudnnGetConvolutionBackwardDataWorkspaceSize",
                         "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                         "cudnnGetConvolutionBackwardFilterWorkspaceSize",
                         "cudnnConvolutionForward",
                         "cudnnConvolutionBackwardData",
                         "cudnnConvolutionBackwardFilter",
                         "cudnnGetVersion",
                         "cudnnBackendCreateDescriptor",
                         "cudnnBackendDestroyDescriptor",
                         "cudnnBackendSetAttribute",
                         "cudnnBackendGetAttribute",
                         "cudnnBackendFinalize",
                         "cudnnBackendExecute"})
    EXPECT_NO_THROW(cudnn_library().symbol<void (*)()>(fn)) << fn;
  for (const char* fn : {"ncclGetUniqueId", "ncclGetLastError", "ncclCommInitRankConfig", "ncclCommFinalize",
                         "ncclCommDestroy", "ncclCommAbort", "ncclCommGetAsyncError", "ncclAllReduce",
                         "ncclAllGather", "ncclReduceScatter", "ncclBroadcast"})
    EXPECT_NO_THROW(nccl_library().symbol<void (*)()>(fn)) << fn;
}

TEST(VendorLibraries, AMissingLibraryNamesWhatWasTriedAndWhatToInstall) {
  tandem::VendorLibrary missing("cuFOO", {"libcufoo.so.99"}, {"/nonexistent/cuda/lib"});
  try {
    missing.load();
    FAIL() << "a library that does not exist was loaded";
  } catch (const tandem::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.status(), TDM_UNAVAILABLE);
    EXPECT_NE(m.find("cuFOO could not be loaded"), std::string::npos) << m;
    EXPECT_NE(m.find("libcufoo.so.99"), std::string::npos) << m;
    EXPECT_NE(m.find("/nonexistent/cuda/lib/libcufoo.so.99"), std::string::npos) << m;
    EXPECT_NE(m.find("install cuFOO"), std::string::npos) << m;
  }
  EXPECT_FALSE(missing.loaded());
}

}  // namespace

// The convolutions' cuDNN graph (plugins/cuda/ops/conv_graph.cpp) as the
// installed cuDNN takes it, without a GPU: from cuDNN 9.8 the tensors, the
// convolution, its operation and the operation graph finalize on the host,
// so every direction gets as far as the device properties, the first step
// that needs a GPU (no handle here). An attribute cuDNN refuses by name,
// type or count stops the build earlier and names that step instead.
namespace {

// x [N, C, H, H] with K filters of R x R, stride 1, "same" padding.
tandem::cuda::ConvGraphShape conv(int64_t N, int64_t C, int64_t H, int64_t K, int64_t R,
                                  cudnnDataType_t dtype) {
  tandem::cuda::ConvGraphShape s;
  s.dtype = dtype;
  const int64_t x[4] = {N, C, H, H}, w[4] = {K, C, R, R}, y[4] = {N, K, H, H};
  for (int i = 0; i < 4; ++i) s.x[i] = x[i], s.w[i] = w[i], s.y[i] = y[i];
  s.padding[0] = s.padding[1] = R / 2;
  return s;
}

constexpr tandem::cuda::ConvDirection kDirections[] = {tandem::cuda::ConvDirection::Forward,
                                                       tandem::cuda::ConvDirection::GradInput,
                                                       tandem::cuda::ConvDirection::GradWeight};

}  // namespace

TEST(VendorLibraries, TheInstalledCudnnTakesTheConvolutionGraphsUpToTheDevice) {
  using namespace tandem::cuda;
  if (cudnnGetVersion() < 90800)
    GTEST_SKIP() << "cuDNN " << cudnnGetVersion() << " needs a GPU handle for the graph itself (before 9.8)";
  for (cudnnDataType_t dtype : {CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16, CUDNN_DATA_HALF})
    for (ConvDirection d : kDirections) {
      const ConvGraphShape shape = conv(2, 3, 6, 4, 3, dtype);
      std::string why_none;
      ConvGraphError error;
      auto plan = ConvGraphPlan::build({}, d, shape, false, {}, why_none, error);
      EXPECT_FALSE(plan);
      EXPECT_TRUE(why_none.empty()) << why_none;
      EXPECT_EQ(error.what, "device properties")  // setting the (null) handle on them
          << "direction " << int(d) << ", dtype " << int(dtype) << ": " << error.what << ": "
          << cudnnGetErrorString(error.status);
    }
}

// The rest of prepare, the heuristic and the execution plans, with the
// installed cuDNN and no GPU: from cuDNN 9.8 a plan can be built for device
// properties read from JSON (cuDNN's ahead-of-time build).
// h100_device_properties.json describes an H100 SXM 80 GB (132 SMs, sm_90,
// 50 MiB of L2, 227 KiB of shared memory per block) in the fields cuDNN
// 9.19 reads; a cuDNN that reads them otherwise skips these tests with its
// reason. Only launching the plans needs a GPU (test_plugin.cpp).
class H100Plans : public ::testing::Test {
 protected:
  void SetUp() override {
    using namespace tandem::cuda;
    if (cudnnGetVersion() < 90800)
      GTEST_SKIP() << "cuDNN " << cudnnGetVersion() << ": before 9.8 plans need a GPU";
    std::ifstream file(TANDEM_H100_PROPERTIES);
    std::stringstream text;
    text << file.rdbuf();
    device.properties_json = text.str();
    ASSERT_FALSE(device.properties_json.empty()) << "cannot read " << TANDEM_H100_PROPERTIES;
    cudnnBackendDescriptor_t d = nullptr;
    ASSERT_EQ(cudnnBackendCreateDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &d), CUDNN_STATUS_SUCCESS);
    const std::string& json = device.properties_json;
    cudnnStatus_t s = cudnnBackendSetAttribute(d, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                                               int64_t(json.size()), json.data());
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(d);
    cudnnBackendDestroyDescriptor(d);
    if (s != CUDNN_STATUS_SUCCESS)
      GTEST_SKIP() << "cuDNN " << cudnnGetVersion()
                   << " does not read the H100 profile written for 9.19: " << cudnnGetErrorString(s);
  }

  std::unique_ptr<tandem::cuda::ConvGraphPlan> build(tandem::cuda::ConvDirection d,
                                                     const tandem::cuda::ConvGraphShape& shape,
                                                     tandem::cuda::math::Determinism determinism,
                                                     size_t limit = size_t(256) << 20) {
    tandem::cuda::math::ConvAlgorithmOptions o;
    o.determinism = determinism, o.workspace_limit = limit;
    why_none.clear();
    error = {};
    return tandem::cuda::ConvGraphPlan::build(device, d, shape, false, o, why_none, error);
  }

  tandem::cuda::ConvGraphDevice device;
  std::string why_none;
  tandem::cuda::ConvGraphError error;
};

TEST_F(H100Plans, EveryDirectionAndDtypeGetsADeterministicEngineWithinTheLimit) {
  using tandem::cuda::math::Determinism;
  for (cudnnDataType_t dtype : {CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16, CUDNN_DATA_HALF})
    for (auto d : kDirections)
      for (const auto& shape : {conv(2, 3, 6, 4, 3, dtype), conv(32, 64, 56, 64, 3, dtype)}) {
        auto plan = build(d, shape, Determinism::prefer);
        ASSERT_TRUE(plan) << "direction " << int(d) << ", dtype " << int(dtype) << ": " << why_none
                          << error.what << (error.what.empty() ? "" : cudnnGetErrorString(error.status));
        EXPECT_GE(plan->engine(), 0);
        EXPECT_LE(plan->workspace(), size_t(256) << 20);
        EXPECT_TRUE(plan->deterministic()) << "engine " << plan->engine();
      }
}

TEST_F(H100Plans, RequireAlwaysTakesADeterministicEngineAndAnyFindsOneToo) {
  // cuDNN's heuristic also offers engines that add with atomics for the
  // gradients; `require` never takes one, `any` takes the heuristic's first.
  using tandem::cuda::math::Determinism;
  for (auto d : kDirections) {
    auto required = build(d, conv(32, 64, 56, 64, 3, CUDNN_DATA_FLOAT), Determinism::require);
    ASSERT_TRUE(required) << why_none << error.what;
    EXPECT_TRUE(required->deterministic());
    auto any = build(d, conv(32, 64, 56, 64, 3, CUDNN_DATA_FLOAT), Determinism::any);
    ASSERT_TRUE(any) << why_none << error.what;
  }
}

TEST_F(H100Plans, AZeroWorkspaceLimitTakesAnEngineWithoutOneOrDeclinesSayingSo) {
  using tandem::cuda::math::Determinism;
  for (auto d : kDirections) {
    auto plan = build(d, conv(32, 64, 56, 64, 3, CUDNN_DATA_FLOAT), Determinism::prefer, 0);
    if (plan) {
      EXPECT_EQ(plan->workspace(), 0u) << "engine " << plan->engine();
    } else {
      EXPECT_NE(why_none.find("cuda.conv_workspace_limit"), std::string::npos) << why_none << error.what;
    }
  }
}
