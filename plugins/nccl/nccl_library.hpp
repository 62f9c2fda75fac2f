// NCCL, opened by soname when the first communicator is created, not when
// the plugin is loaded (sdk/ABI.md rule 24): every `tandem` command loads
// this plugin. The plugin links nccl.h only; each function it calls is
// routed through the opened library here. Include this, never <nccl.h>
// directly, where NCCL is called: a call not routed here would need
// libnccl at link time, which the plugin's link (-Wl,--no-undefined, no
// -lnccl) refuses.
#ifndef TANDEM_NCCL_LIBRARY_HPP
#define TANDEM_NCCL_LIBRARY_HPP

#include <nccl.h>

#include "tandem/vendor_library.hpp"

namespace tandem::nccl {

VendorLibrary& nccl_library();

}  // namespace tandem::nccl

#define TANDEM_NCCL(fn) TANDEM_VENDOR_FN(::tandem::nccl::nccl_library(), fn)
#define ncclGetUniqueId(...) TANDEM_NCCL(ncclGetUniqueId)(__VA_ARGS__)
#define ncclGetErrorString(...) TANDEM_NCCL(ncclGetErrorString)(__VA_ARGS__)
#define ncclGetLastError(...) TANDEM_NCCL(ncclGetLastError)(__VA_ARGS__)
#define ncclCommInitRankConfig(...) TANDEM_NCCL(ncclCommInitRankConfig)(__VA_ARGS__)
#define ncclCommFinalize(...) TANDEM_NCCL(ncclCommFinalize)(__VA_ARGS__)
#define ncclCommDestroy(...) TANDEM_NCCL(ncclCommDestroy)(__VA_ARGS__)
#define ncclCommAbort(...) TANDEM_NCCL(ncclCommAbort)(__VA_ARGS__)
#define ncclCommGetAsyncError(...) TANDEM_NCCL(ncclCommGetAsyncError)(__VA_ARGS__)
#define ncclAllReduce(...) TANDEM_NCCL(ncclAllReduce)(__VA_ARGS__)
#define ncclAllGather(...) TANDEM_NCCL(ncclAllGather)(__VA_ARGS__)
#define ncclReduceScatter(...) TANDEM_NCCL(ncclReduceScatter)(__VA_ARGS__)
#define ncclBroadcast(...) TANDEM_NCCL(ncclBroadcast)(__VA_ARGS__)
#define ncclCommSplit(...) TANDEM_NCCL(ncclCommSplit)(__VA_ARGS__)
#define ncclSend(...) TANDEM_NCCL(ncclSend)(__VA_ARGS__)
#define ncclRecv(...) TANDEM_NCCL(ncclRecv)(__VA_ARGS__)
#define ncclGroupStart(...) TANDEM_NCCL(ncclGroupStart)(__VA_ARGS__)
#define ncclGroupEnd(...) TANDEM_NCCL(ncclGroupEnd)(__VA_ARGS__)

#endif
