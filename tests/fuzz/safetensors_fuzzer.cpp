// Fuzzes the safetensors checkpoint reader (host/checkpoint): checkpoints
// are resumed after crashes, copied between machines and downloaded, so the
// header length, the JSON header, the offsets and the CRC-32 metadata are
// all untrusted, and a bad file must be refused before anything is loaded.
//
// Input: one .safetensors file (parsed in memory, as read_safetensors does
// after reading the file).
#include <string_view>

#include "checkpoint/safetensors.hpp"
#include "fuzz_support.hpp"
#include "tandem/tandem.hpp"

using tandem::fuzz::expect;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto cp = tandem::host::checkpoint::parse_safetensors(bytes, "fuzz.safetensors");
  if (!cp) {
    expect(cp.error().message.starts_with("fuzz.safetensors"), "an error names the file");
    return 0;
  }
  // Loading copies data.size() bytes into a tensor of this shape and dtype.
  for (const auto& t : cp->tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      expect(d >= 0, "dimensions are not negative");
      numel *= uint64_t(d);
    }
    expect(numel * tandem::dtype_size(t.dtype) == t.data.size(), "the bytes match the shape and dtype");
  }
  return 0;
}
