#include "util/host_memory.hpp"

#include <unistd.h>

#include "util/format.hpp"

namespace tandem::host {

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

Result<void> check_host_memory(uint64_t bytes, const std::string& what, const std::string& remedy) {
  const uint64_t total = physical_memory_bytes();
  if (total == 0 || bytes <= total) return {};
  return make_error(what + " needs " + human_bytes(bytes) + " of host memory, more than this machine's " +
                        human_bytes(total) + "; " + remedy,
                    TDM_OUT_OF_MEMORY);
}

}  // namespace tandem::host
