#include "data/token_stream.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "util/host_memory.hpp"

namespace tandem::host::data {

int token_width(const std::string& dtype) {
  return dtype == "u8" ? 1 : dtype == "u16" ? 2 : dtype == "u32" ? 4 : 0;
}

Result<TokenStream> read_token_file(const std::string& path, int width, int64_t context, int64_t vocab,
                                    uint32_t* largest) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return make_error(path + " is a directory: [data] token files name one file each", TDM_INVALID_ARGUMENT);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return make_error(path + ": cannot open the token file (" + std::string(std::strerror(errno)) + ")",
                      TDM_NOT_FOUND);
  const auto bytes = static_cast<uint64_t>(in.tellg());
  if (bytes % uint64_t(width) != 0)
    return make_error(path + ": " + std::to_string(bytes) + " bytes is not a whole number of " +
                          std::to_string(width) +
                          "-byte tokens: check [data] token_dtype, or the file is truncated",
                      TDM_INVALID_ARGUMENT);
  if (auto r = check_host_memory(bytes, "the token file " + path, "use a smaller file"); !r) return r.error();
  auto data = std::make_shared<std::vector<uint8_t>>(bytes);
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(data->data()), std::streamsize(bytes)))
    return make_error(path + ": read error after " + std::to_string(in.gcount()) + " bytes",
                      TDM_INVALID_ARGUMENT);
  TokenStream stream(data, width, 0, int64_t(bytes) / width);
  if (stream.size() < context + 1)
    return make_error(path + " holds " + std::to_string(stream.size()) +
                          " tokens, fewer than one window of " +
                          "[model] context + 1 = " + std::to_string(context + 1),
                      TDM_INVALID_ARGUMENT);
  uint32_t most = 0;
  for (int64_t i = 0; i < stream.size(); ++i) {
    const uint32_t t = stream.at(i);
    if (int64_t(t) >= vocab)
      return make_error(path + ": token " + std::to_string(i) + " is " + std::to_string(t) +
                            ", not below [model] vocab_size = " + std::to_string(vocab) +
                            " (a wrong token_dtype, or a file for another vocabulary)",
                        TDM_INVALID_ARGUMENT);
    most = std::max(most, t);
  }
  if (largest != nullptr) *largest = most;
  return stream;
}

}  // namespace tandem::host::data
