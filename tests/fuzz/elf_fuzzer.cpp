// Fuzzes the check of a plugin file before dlopen (sdk/plugin_check/src/
// elf_check.cpp, shared by the host and the conformance kit): it exists so
// that a damaged shared library is refused with a reason instead of
// killing the process inside the dynamic loader, so it must itself survive
// any bytes. Only the check runs here: fuzz
// bytes are never loaded.
//
// Input: one file. Both the in-memory check (the whole file) and the file
// check (which reads only the headers) run, and must agree.
#include <span>

#include "fuzz_support.hpp"
#include "tandem/plugin_check.hpp"

using tandem::fuzz::expect;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tandem::fuzz::ScratchFile file("libtandem-plugin-fuzz.so");
  const auto image = tandem::plugin_check::check_elf_image(std::span<const uint8_t>(data, size), size);
  const auto checked = tandem::plugin_check::check_plugin_file(file.write(data, size));
  expect(image.has_value() == checked.has_value(), "the file check agrees with the check of the whole image");
  return 0;
}
