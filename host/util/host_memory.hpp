// Host memory a data set or a file needs, checked before it is allocated:
// a request beyond what the machine has would end the process with
// std::bad_alloc (or the kernel's OOM killer) and say nothing about which
// file or tensor asked for it.
#pragma once

#include <cstdint>
#include <string>

#include "util/result.hpp"

namespace tandem::host {

// The machine's physical memory in bytes (0 when it cannot be read).
uint64_t physical_memory_bytes();

// An error naming `what` and both sizes when `bytes` exceed the machine's
// physical memory; `remedy` says what to change.
Result<void> check_host_memory(uint64_t bytes, const std::string& what, const std::string& remedy);

}  // namespace tandem::host
