// The device buffers of one run_op, each between two guard regions.
//
// A kernel that writes past the end of an output (or before its start)
// would otherwise corrupt whatever the allocator put there: one float over
// passed unseen, four aborted the whole kit in the C library's heap check
// with no case named. Every buffer the kit hands a kernel — inputs, outputs,
// workspace — is allocated with kGuardBytes more on each side, both filled
// with a known pattern; after the launch the guards are read back, and a
// changed byte names the buffer and how far outside it the kernel wrote.
// kGuardBytes keeps any alignment up to 4 KiB the backend's mem_alloc gives.
#ifndef TANDEM_CONFORMANCE_GUARDED_BUFFERS_HPP
#define TANDEM_CONFORMANCE_GUARDED_BUFFERS_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tandem/conformance/plugin_under_test.hpp"

namespace tandem::conformance {

inline constexpr size_t kGuardBytes = 4096;

class GuardedBuffers {
 public:
  explicit GuardedBuffers(PluginUnderTest& plugin) : plugin_(plugin) {}
  // Waits for the stream (no copy or kernel may still use a buffer), frees.
  ~GuardedBuffers();
  GuardedBuffers(const GuardedBuffers&) = delete;
  GuardedBuffers& operator=(const GuardedBuffers&) = delete;

  // A buffer of `bytes` for the kernel, named `what` ("output 0") in
  // reports, its guards written (queued on the stream).
  tdm_status allocate(size_t bytes, std::string what, void** out);
  // After the stream is synchronized: "" when every guard is intact, else
  // which buffer the kernel wrote outside of, on which side, how far
  // ("the kernel wrote past the end of output 0 (32 bytes): 16 bytes
  // changed, +0..+15 after it").
  // Reads the guards back (and synchronizes again); a failing copy is
  // reported as such.
  std::string check_guards();

 private:
  struct Buffer {
    uint8_t* base = nullptr;  // what mem_alloc returned
    size_t bytes = 0;         // the kernel's part, after the first guard
    std::string what;
  };
  PluginUnderTest& plugin_;
  std::vector<Buffer> buffers_;
};

}  // namespace tandem::conformance

#endif
