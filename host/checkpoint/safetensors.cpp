#include "checkpoint/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/atomic_file.hpp"
#include "tandem/tandem.hpp"

namespace tandem::host::checkpoint {
namespace {

using json = nlohmann::json;

size_t dtype_bytes(tdm_dtype t) {
  return tandem::dtype_size(t);
}

std::string crc_hex(const std::vector<std::byte>& data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes at most 4 GiB per call.
  for (size_t done = 0; done < data.size();) {
    const size_t chunk = std::min<size_t>(data.size() - done, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + done), static_cast<uInt>(chunk));
    done += chunk;
  }
  char text[9];
  std::snprintf(text, sizeof text, "%08lx", static_cast<unsigned long>(crc));
  return text;
}

// A list of JSON integers. nlohmann converts a float to an integer with a
// plain cast, undefined beyond the integer's range (1e300).
bool integers(const json& list) {
  return list.is_array() &&
         std::all_of(list.begin(), list.end(), [](const json& e) { return e.is_number_integer(); });
}

uint64_t load_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string store_le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

}  // namespace

const char* safetensors_dtype(tdm_dtype dtype) {
  switch (dtype) {
    case TDM_F32:
      return "F32";
    case TDM_F64:
      return "F64";
    case TDM_F16:
      return "F16";
    case TDM_BF16:
      return "BF16";
    case TDM_S8:
      return "I8";
    case TDM_U8:
      return "U8";
    case TDM_S32:
      return "I32";
    case TDM_S64:
      return "I64";
    default:
      return "";
  }
}

tdm_dtype dtype_from_safetensors(const std::string& name) {
  for (tdm_dtype t : {TDM_F32, TDM_F64, TDM_F16, TDM_BF16, TDM_S8, TDM_U8, TDM_S32, TDM_S64})
    if (name == safetensors_dtype(t)) return t;
  return TDM_DTYPE_INVALID;
}

const TensorRecord* Checkpoint::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Result<void> write_safetensors(const std::string& path, const Checkpoint& checkpoint) {
  json header = json::object();
  json metadata = json::object();
  for (const auto& [k, v] : checkpoint.metadata) metadata[k] = v;
  uint64_t offset = 0;
  for (const auto& t : checkpoint.tensors) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    if (static_cast<size_t>(numel) * dtype_bytes(t.dtype) != t.data.size() || dtype_bytes(t.dtype) == 0)
      return make_error(path + ": tensor '" + t.name + "' has " + std::to_string(t.data.size()) +
                            " bytes, which does not match its shape and dtype",
                        TDM_INTERNAL);
    header[t.name] = {{"dtype", safetensors_dtype(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    metadata["crc32." + t.name] = crc_hex(t.data);
    offset += t.data.size();
  }
  header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the spec's recommended alignment
  const std::string length = store_le64(text.size());
  std::vector<std::string_view> parts = {length, text};
  for (const auto& t : checkpoint.tensors)
    parts.emplace_back(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  return write_file_atomically(path, parts);
}

namespace {

// Where the JSON header stops being JSON, in the file's bytes, and what
// stood there (the parser's `byte` counts from 1 within the header, one past
// the character it could not take).
std::string json_error_at(std::string_view header, size_t byte) {
  const size_t at = std::min(byte > 0 ? byte - 1 : 0, header.size());
  if (at >= header.size())
    return "its JSON header ends inside a value at byte " + std::to_string(8 + header.size()) +
           " of the file, where more JSON was expected (a truncated file or a wrong header length)";
  const size_t from = at > 24 ? at - 24 : 0;
  std::string before(header.substr(from, at - from));
  for (char& c : before)
    if (c < 0x20) c = ' ';
  const unsigned char c = static_cast<unsigned char>(header[at]);
  char found[16];
  std::snprintf(found, sizeof found, c >= 0x20 && c < 0x7f ? "'%c'" : "the byte 0x%02x", c);
  // What complete JSON stands before it, if any, wants nothing after it.
  const std::string expected = json::accept(header.substr(0, at))
                                   ? "the end of the header (one JSON object, then spaces only)"
                                   : "a JSON value, a string key, ':', ',' or a closing bracket";
  return "its JSON header is not valid JSON at byte " + std::to_string(8 + at) +
         " of the file: " + std::string(found) + " after '" + before + "', where " + expected +
         " was expected";
}

}  // namespace

Result<Checkpoint> parse_safetensors(std::string_view bytes, const std::string& path,
                                     const TensorFilter& keep) {
  const auto corrupt = [&](const std::string& why) {
    return make_error(path + ": not a valid safetensors checkpoint (" + why + "); nothing was loaded",
                      TDM_INVALID_ARGUMENT);
  };
  if (bytes.size() < 8) return corrupt("file shorter than its 8-byte header length");
  const uint64_t n = load_le64(reinterpret_cast<const unsigned char*>(bytes.data()));
  if (n > bytes.size() - 8) return corrupt("header length " + std::to_string(n) + " exceeds the file size");
  json header;
  try {
    header = json::parse(bytes.substr(8, n));
  } catch (const json::parse_error& e) {
    return corrupt(json_error_at(bytes.substr(8, n), e.byte));
  } catch (const json::exception&) {  // out_of_range: a number no double holds (1e400)
    return corrupt("its JSON header holds a number too large for a double");
  }
  if (!header.is_object()) return corrupt("header is not a JSON object");
  const size_t data_start = 8 + n;
  Checkpoint cp;
  try {
    if (header.contains("__metadata__"))
      for (const auto& [k, v] : header["__metadata__"].items()) cp.metadata[k] = v.get<std::string>();
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__" || (keep && !keep(name))) continue;
      TensorRecord t;
      t.name = name;
      t.dtype = dtype_from_safetensors(entry.at("dtype").get<std::string>());
      if (!integers(entry.at("shape")) || !integers(entry.at("data_offsets")))
        return corrupt("tensor '" + name + "' has a shape or data_offsets that is not a list of integers");
      t.shape = entry.at("shape").get<std::vector<int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      if (t.dtype == TDM_DTYPE_INVALID) return corrupt("tensor '" + name + "' has an unsupported dtype");
      // Against the data's size, not data_start + offset: an offset near
      // 2^64 would wrap the sum back inside the file.
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > bytes.size() - data_start)
        return corrupt("tensor '" + name + "' points outside the file (truncated?)");
      // Without overflow, and no negative dimensions: [-1] or [-2, -3]
      // would otherwise pass for some byte count and load a nonsense shape.
      uint64_t size = dtype_bytes(t.dtype);
      bool fits = true;
      for (int64_t d : t.shape) {
        if (d < 0) return corrupt("tensor '" + name + "' has a negative dimension " + std::to_string(d));
        fits = fits && !__builtin_mul_overflow(size, uint64_t(d), &size);
      }
      if (!fits || offsets[1] - offsets[0] != size)
        return corrupt("tensor '" + name + "' has a size that does not match its shape");
      const auto* begin = reinterpret_cast<const std::byte*>(bytes.data() + data_start + offsets[0]);
      t.data.assign(begin, begin + (offsets[1] - offsets[0]));
      cp.tensors.push_back(std::move(t));
    }
  } catch (const json::exception&) {
    return corrupt(
        "a header entry has a missing or mistyped field: each tensor needs \"dtype\" (a string), "
        "\"shape\" and \"data_offsets\" (lists of integers), and \"__metadata__\" maps strings to strings");
  }
  for (const auto& t : cp.tensors) {
    auto it = cp.metadata.find("crc32." + t.name);
    if (it == cp.metadata.end()) continue;  // a file written by another tool
    const std::string actual = crc_hex(t.data);
    if (actual != it->second)
      return make_error(path + ": tensor '" + t.name + "' failed its checksum (stored crc32 " + it->second +
                            ", computed " + actual +
                            "): the checkpoint is corrupted; nothing was loaded. Resume from an "
                            "older checkpoint in the same directory",
                        TDM_INVALID_ARGUMENT);
  }
  return cp;
}

Result<Checkpoint> read_safetensors(const std::string& path, const TensorFilter& keep) {
  // Mapped, not read: the tensors are copied once, out of the page cache,
  // so a multi-gigabyte shard costs its tensors' size and no more.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(path + ": cannot open the checkpoint", TDM_NOT_FOUND);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(path + ": cannot open the checkpoint (not a regular file)", TDM_NOT_FOUND);
  }
  const size_t size = size_t(st.st_size);
  if (size == 0) {
    ::close(fd);
    return parse_safetensors({}, path, keep);
  }
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED)
    return make_error(path + ": cannot map the checkpoint into memory", TDM_NOT_FOUND);
  ::madvise(mapped, size, MADV_SEQUENTIAL);
  auto parsed = parse_safetensors(std::string_view(static_cast<const char*>(mapped), size), path, keep);
  ::munmap(mapped, size);
  return parsed;
}

}  // namespace tandem::host::checkpoint
