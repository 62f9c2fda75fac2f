// cuBLAS, cuDNN and NCCL are opened by soname when a GPU (or communicator)
// first needs them, not linked (plugins/cuda/vendor, plugins/nccl). Without
// a GPU this still checks what can go wrong: the libraries are found (by the
// loader's paths, or the build's toolkit), every function the plugins route
// resolves in them, and calls through the routing work (the error-string
// functions need no GPU), and the convolutions' cuDNN graphs are accepted by
// the installed cuDNN as far as it goes without a GPU. A missing library is
// an error naming every file tried and the package to install.
#include <gtest/gtest.h>

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
TEST(VendorLibraries, TheInstalledCudnnTakesTheConvolutionGraphsUpToTheDevice) {
  using namespace tandem::cuda;
  if (cudnnGetVersion() < 90800)
    GTEST_SKIP() << "cuDNN " << cudnnGetVersion() << " needs a GPU handle for the graph itself (before 9.8)";
  ConvGraphShape shape;
  const int64_t x[4] = {2, 3, 6, 5}, w[4] = {4, 3, 3, 3}, y[4] = {2, 4, 3, 3};  // stride 2, padding 1
  for (int i = 0; i < 4; ++i) shape.x[i] = x[i], shape.w[i] = w[i], shape.y[i] = y[i];
  shape.stride[0] = shape.stride[1] = 2, shape.padding[0] = shape.padding[1] = 1;
  for (cudnnDataType_t dtype : {CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16, CUDNN_DATA_HALF})
    for (ConvDirection d : {ConvDirection::Forward, ConvDirection::GradInput, ConvDirection::GradWeight}) {
      shape.dtype = dtype;
      std::string why_none;
      ConvGraphError error;
      auto plan = ConvGraphPlan::build(nullptr, d, shape, false, {}, why_none, error);
      EXPECT_FALSE(plan);
      EXPECT_TRUE(why_none.empty()) << why_none;
      EXPECT_EQ(error.what, "device properties")  // setting the (null) handle on them
          << "direction " << int(d) << ", dtype " << int(dtype) << ": " << error.what << ": "
          << cudnnGetErrorString(error.status);
    }
}
