// Fuzzes the host's check of a plugin file before dlopen (host/plugin/
// elf_check.cpp): it exists so that a damaged shared library is refused
// with a reason instead of killing the process inside the dynamic loader,
// so it must itself survive any bytes. Only the check runs here: fuzz
// bytes are never loaded.
//
// Input: one file. Both the in-memory check (the whole file) and the file
// check (which reads only the headers) run, and must agree.
#include <span>

#include "fuzz_support.hpp"
#include "plugin/elf_check.hpp"

using tandem::fuzz::expect;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tandem::fuzz::ScratchFile file("libtandem-plugin-fuzz.so");
  const auto image = tandem::host::check_elf_image(std::span<const uint8_t>(data, size), size);
  const auto checked = tandem::host::check_plugin_file(file.write(data, size));
  expect(image.ok() == checked.ok(), "the file check agrees with the check of the whole image");
  return 0;
}
