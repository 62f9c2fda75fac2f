// Checks a plugin file's ELF headers before the dynamic loader maps it.
//
// dlopen trusts the file: a shared library cut short (a partial download, a
// full disk during an install) has program headers that point past its end,
// and the loader's first touch of such a page kills the whole process with
// SIGBUS — before any plugin code runs, in every command that scans the
// directory. So the host reads the ELF header and the program header table
// itself and refuses, with a reason, a file that is not a 64-bit
// little-endian shared library for this machine, or whose segments or
// section header table do not lie within the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "util/result.hpp"

namespace tandem::host {

// `head`: the file's first bytes (at least through its program header table
// when the file has that many); `file_size`: its whole size. The error says
// what is wrong, without the file name.
Result<void> check_elf_image(std::span<const uint8_t> head, uint64_t file_size);

// Reads what check_elf_image needs from `file`; the error names the file
// and what to do.
Result<void> check_plugin_file(const std::filesystem::path& file);

}  // namespace tandem::host
