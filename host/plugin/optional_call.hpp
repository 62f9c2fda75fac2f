// Calling an optional table function (sdk/ABI.md rules 3 and 23): the field must fit the
// table's struct_size (the plugin was built with an SDK that has it), the
// negotiated minor must include it, and the pointer must be non-NULL.
// Callers always have a fallback for the nullptr case.
//
//   if (auto fn = TANDEM_OPTIONAL_FN(plugin, backend, tdm_backend_api, memory_stats, 1)) fn(device, &stats);
#pragma once

#include <cstdint>

#include "tandem/types.h"

namespace tandem::host {

// Returns the function pointer, or nullptr when it must not be called.
// Reads the field only after the size check, never past the plugin's table.
template <class Table, class Fn>
Fn optional_fn(const Table* table, size_t field_end, Fn Table::*field, uint32_t effective_minor,
               uint32_t since_minor) noexcept {
  if (table == nullptr || effective_minor < since_minor) return nullptr;
  if (table->struct_size < field_end) return nullptr;
  return table->*field;
}

}  // namespace tandem::host

// PLUGIN: a LoadedPlugin; TABLE: its member (backend/feature/comm).
#define TANDEM_OPTIONAL_FN(PLUGIN, TABLE, TYPE, FIELD, SINCE_MINOR)                       \
  ::tandem::host::optional_fn((PLUGIN).TABLE, TDM_STRUCT_SIZE(TYPE, FIELD), &TYPE::FIELD, \
                              (PLUGIN).abi_minor_effective, (SINCE_MINOR))
