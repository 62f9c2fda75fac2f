// Checkpoint files in the safetensors format.
//
// Layout (per the safetensors specification): an 8-byte little-endian header
// length N, N bytes of JSON — {"__metadata__": {string: string}, "<tensor>":
// {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}} — padded
// with spaces to 8 bytes, then the tensor bytes. Tandem adds a CRC-32 per
// tensor in the metadata ("crc32.<tensor>"), so a corrupted file is refused
// naming the tensor that failed, before anything is loaded.
//
// Writing is atomic: a temporary file in the same directory, fsync, rename,
// fsync of the directory. A crash leaves the previous checkpoint intact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/types.h"
#include "util/result.hpp"

namespace tandem::host::checkpoint {

struct TensorRecord {
  std::string name;
  tdm_dtype dtype = TDM_F32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;
};

struct Checkpoint {
  std::map<std::string, std::string> metadata;
  std::vector<TensorRecord> tensors;

  const TensorRecord* find(const std::string& name) const;
};

Result<void> write_safetensors(const std::string& path, const Checkpoint& checkpoint);
// Which tensors, by their name in the file, to read (empty: all).
using TensorFilter = std::function<bool(const std::string& name)>;
// Reads and verifies every tensor's checksum (when present); with `keep`,
// only the tensors it keeps (the others' bytes are never touched).
Result<Checkpoint> read_safetensors(const std::string& path, const TensorFilter& keep = {});
// The same from the file's bytes in memory; `path` only names it in errors
// (the fuzzer, tests/fuzz, calls this one).
Result<Checkpoint> parse_safetensors(std::string_view bytes, const std::string& path,
                                     const TensorFilter& keep = {});

// The safetensors dtype string ("F32") of a Tandem dtype, and back.
const char* safetensors_dtype(tdm_dtype dtype);
tdm_dtype dtype_from_safetensors(const std::string& name);

}  // namespace tandem::host::checkpoint
