// cuDNN for the plugin's code: its header, and each function the plugin
// calls routed through the library opened at device open
// (vendor_libraries.hpp). Include this, never <cudnn.h> directly: a call
// this file does not route would need libcudnn at link time, which the
// plugin's link (-Wl,--no-undefined, no -lcudnn) refuses.
#ifndef TANDEM_CUDA_VENDOR_CUDNN_HPP
#define TANDEM_CUDA_VENDOR_CUDNN_HPP

#include <cudnn.h>

#include "vendor/vendor_libraries.hpp"

#define TANDEM_CUDNN(fn) TANDEM_VENDOR_FN(::tandem::cuda::cudnn_library(), fn)
#define cudnnCreate(...) TANDEM_CUDNN(cudnnCreate)(__VA_ARGS__)
#define cudnnDestroy(...) TANDEM_CUDNN(cudnnDestroy)(__VA_ARGS__)
#define cudnnSetStream(...) TANDEM_CUDNN(cudnnSetStream)(__VA_ARGS__)
#define cudnnGetErrorString(...) TANDEM_CUDNN(cudnnGetErrorString)(__VA_ARGS__)
#define cudnnCreateTensorDescriptor(...) TANDEM_CUDNN(cudnnCreateTensorDescriptor)(__VA_ARGS__)
#define cudnnDestroyTensorDescriptor(...) TANDEM_CUDNN(cudnnDestroyTensorDescriptor)(__VA_ARGS__)
#define cudnnSetTensor4dDescriptor(...) TANDEM_CUDNN(cudnnSetTensor4dDescriptor)(__VA_ARGS__)
#define cudnnCreateFilterDescriptor(...) TANDEM_CUDNN(cudnnCreateFilterDescriptor)(__VA_ARGS__)
#define cudnnDestroyFilterDescriptor(...) TANDEM_CUDNN(cudnnDestroyFilterDescriptor)(__VA_ARGS__)
#define cudnnSetFilter4dDescriptor(...) TANDEM_CUDNN(cudnnSetFilter4dDescriptor)(__VA_ARGS__)
#define cudnnCreateConvolutionDescriptor(...) TANDEM_CUDNN(cudnnCreateConvolutionDescriptor)(__VA_ARGS__)
#define cudnnDestroyConvolutionDescriptor(...) TANDEM_CUDNN(cudnnDestroyConvolutionDescriptor)(__VA_ARGS__)
#define cudnnSetConvolution2dDescriptor(...) TANDEM_CUDNN(cudnnSetConvolution2dDescriptor)(__VA_ARGS__)
#define cudnnSetConvolutionGroupCount(...) TANDEM_CUDNN(cudnnSetConvolutionGroupCount)(__VA_ARGS__)
#define cudnnSetConvolutionMathType(...) TANDEM_CUDNN(cudnnSetConvolutionMathType)(__VA_ARGS__)
#define cudnnGetConvolutionForwardAlgorithm_v7(...) \
  TANDEM_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7)(__VA_ARGS__)
#define cudnnGetConvolutionForwardWorkspaceSize(...) \
  TANDEM_CUDNN(cudnnGetConvolutionForwardWorkspaceSize)(__VA_ARGS__)
#define cudnnGetConvolutionBackwardDataAlgorithm_v7(...) \
  TANDEM_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7)(__VA_ARGS__)
#define cudnnGetConvolutionBackwardDataWorkspaceSize(...) \
  TANDEM_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize)(__VA_ARGS__)
#define cudnnGetConvolutionBackwardFilterAlgorithm_v7(...) \
  TANDEM_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7)(__VA_ARGS__)
#define cudnnGetConvolutionBackwardFilterWorkspaceSize(...) \
  TANDEM_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize)(__VA_ARGS__)
#define cudnnConvolutionForward(...) TANDEM_CUDNN(cudnnConvolutionForward)(__VA_ARGS__)
#define cudnnConvolutionBackwardData(...) TANDEM_CUDNN(cudnnConvolutionBackwardData)(__VA_ARGS__)
#define cudnnConvolutionBackwardFilter(...) TANDEM_CUDNN(cudnnConvolutionBackwardFilter)(__VA_ARGS__)
#define cudnnGetVersion(...) TANDEM_CUDNN(cudnnGetVersion)(__VA_ARGS__)
#define cudnnBackendCreateDescriptor(...) TANDEM_CUDNN(cudnnBackendCreateDescriptor)(__VA_ARGS__)
#define cudnnBackendDestroyDescriptor(...) TANDEM_CUDNN(cudnnBackendDestroyDescriptor)(__VA_ARGS__)
#define cudnnBackendSetAttribute(...) TANDEM_CUDNN(cudnnBackendSetAttribute)(__VA_ARGS__)
#define cudnnBackendGetAttribute(...) TANDEM_CUDNN(cudnnBackendGetAttribute)(__VA_ARGS__)
#define cudnnBackendFinalize(...) TANDEM_CUDNN(cudnnBackendFinalize)(__VA_ARGS__)
#define cudnnBackendExecute(...) TANDEM_CUDNN(cudnnBackendExecute)(__VA_ARGS__)

#endif
