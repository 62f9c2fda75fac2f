// `--memory-budget onednn:0=2GiB,cuda:0=6GiB`: bytes each device may hold.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "plugin/registry.hpp"
#include "util/result.hpp"

namespace tandem::cli {

// Devices as --device names them ("cpu", "onednn", "reference:0"), resolved
// to device ids; sizes with B, KiB, MiB or GiB (or a plain byte count).
host::Result<std::map<std::string, uint64_t>> parse_memory_budget(const std::string& text,
                                                                  const host::PluginRegistry& registry);

}  // namespace tandem::cli
