#include "train/staged_gather.hpp"

#include <algorithm>

namespace tandem::host::train {

size_t staging_piece(size_t bytes, size_t limit, size_t element) {
  const size_t whole = std::max(element, limit / element * element);
  return std::min(bytes, whole);
}

Result<void> gather_in_pieces(const void* send, void* receive, size_t bytes, int world, size_t element,
                              void* buffer, size_t piece, const StagingCalls& calls) {
  if (piece == 0 || piece % element != 0 || bytes % element != 0)
    return make_error("staged gather: " + std::to_string(bytes) + " bytes in pieces of " +
                          std::to_string(piece) + " split an element of " + std::to_string(element) +
                          " bytes",
                      TDM_INVALID_ARGUMENT);
  const auto* from = static_cast<const char*>(send);
  auto* into = static_cast<char*>(receive);
  char* outgoing = static_cast<char*>(buffer);
  char* incoming = outgoing + piece;
  for (size_t offset = 0; offset < bytes; offset += piece) {
    const size_t length = std::min(piece, bytes - offset);
    if (auto r = calls.to_device(outgoing, from + offset, length); !r) return r;
    if (auto r = calls.gather(outgoing, incoming, length); !r) return r;
    // The device holds each rank's piece one after another; on the host
    // each rank's piece goes to its place within that rank's block.
    for (int rank = 0; rank < world; ++rank)
      if (auto r =
              calls.to_host(into + size_t(rank) * bytes + offset, incoming + size_t(rank) * length, length);
          !r)
        return r;
  }
  return {};
}

}  // namespace tandem::host::train
