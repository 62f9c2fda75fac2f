// A plugin file cut short, or not a shared library for this machine, is
// refused with a reason before the dynamic loader maps it (a truncated file
// would otherwise kill the process with SIGBUS inside dlopen), and the rest
// of the directory loads as usual.
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "plugin/registry.hpp"
#include "tandem/plugin_check.hpp"
#include "test_support.hpp"

namespace tandem::test {
namespace {

using plugin_check::check_elf_image;

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "missing '" << (part) << "' in: " << (text)

std::vector<uint8_t> bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string why(const std::vector<uint8_t>& bytes, uint64_t size) {
  auto r = check_elf_image(bytes, size);
  return r ? r->message : "";
}

Elf64_Ehdr header(const std::vector<uint8_t>& bytes) {
  Elf64_Ehdr h;
  std::memcpy(&h, bytes.data(), sizeof h);
  return h;
}

const fs::path kGood = built_plugin("good", "testgood");

TEST(DamagedPlugin, AnIntactPluginPasses) {
  const std::vector<uint8_t> bytes = bytes_of(kGood);
  ASSERT_GT(bytes.size(), sizeof(Elf64_Ehdr));
  EXPECT_EQ(why(bytes, bytes.size()), "");
}

TEST(DamagedPlugin, EveryCutIsRefused) {
  const std::vector<uint8_t> bytes = bytes_of(kGood);
  for (uint64_t k = 0; k < 16; ++k) {
    const size_t cut = k == 0 ? bytes.size() - 1 : bytes.size() * k / 16;
    std::vector<uint8_t> head(bytes.begin(), bytes.begin() + ptrdiff_t(cut));
    const std::string reason = why(head, cut);
    EXPECT_TRUE(reason.find("cut short") != std::string::npos ||
                reason.find("too short") != std::string::npos)
        << "cut at " << cut << " of " << bytes.size() << ": '" << reason << "'";
  }
}

// Without a section header table (stripped that way), the segments alone
// must still show the cut.
TEST(DamagedPlugin, ACutSegmentIsNamedWithoutSectionHeaders) {
  std::vector<uint8_t> bytes = bytes_of(kGood);
  Elf64_Ehdr h = header(bytes);
  h.e_shoff = 0;
  h.e_shnum = 0;
  std::memcpy(bytes.data(), &h, sizeof h);
  uint64_t end = 0;
  for (uint16_t i = 0; i < h.e_phnum; ++i) {
    Elf64_Phdr p;
    std::memcpy(&p, bytes.data() + h.e_phoff + i * sizeof p, sizeof p);
    if (p.p_type == PT_LOAD) end = std::max<uint64_t>(end, p.p_offset + p.p_filesz);
  }
  ASSERT_GT(end, 0u);
  EXPECT_EQ(why(bytes, end), "");
  const std::string reason = why(bytes, end - 1);
  EXPECT_HAS(reason, "it is cut short: segment ");
  EXPECT_HAS(reason, "ends at byte " + std::to_string(end));
}

TEST(DamagedPlugin, NotASharedLibraryForThisMachine) {
  const std::vector<uint8_t> good = bytes_of(kGood);
  const auto with = [&](auto change) {
    std::vector<uint8_t> b = good;
    Elf64_Ehdr h = header(b);
    change(h);
    std::memcpy(b.data(), &h, sizeof h);
    return why(b, b.size());
  };
  EXPECT_HAS(with([](Elf64_Ehdr& h) { h.e_ident[EI_MAG1] = 'X'; }), "not an ELF file");
  EXPECT_HAS(with([](Elf64_Ehdr& h) { h.e_ident[EI_CLASS] = ELFCLASS32; }), "not a 64-bit ELF file");
  EXPECT_HAS(with([](Elf64_Ehdr& h) { h.e_ident[EI_DATA] = ELFDATA2MSB; }), "not a little-endian");
  EXPECT_HAS(with([](Elf64_Ehdr& h) { h.e_type = ET_REL; }), "not a shared library");
  EXPECT_HAS(with([](Elf64_Ehdr& h) { h.e_machine = EM_RISCV; }), "for another machine");
  EXPECT_HAS(with([](Elf64_Ehdr& h) { h.e_phoff = ~uint64_t(0) - 8; }), "program header table ends past");
  EXPECT_HAS(with([](Elf64_Ehdr& h) { h.e_phentsize = 12; }), "program header table is malformed");
  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o', '\n'};
  EXPECT_HAS(why(text, text.size()), "too short to be a shared library (6 bytes)");
}

// As a user meets it: a half-copied plugin beside a good one in the
// directory; the good one loads, the damaged one is skipped with its reason.
TEST(DamagedPlugin, TheDirectoryStillLoads) {
  ScratchDir scratch;
  const fs::path dir = scratch.dir("d");
  ScratchDir::copy(kGood, dir, "libtandem-testgood.so");
  const std::vector<uint8_t> bytes = bytes_of(kGood);
  const fs::path half = dir / "libtandem-half.so";
  std::ofstream(half, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size() / 2));
  fs::permissions(
      half, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  host::HostServices services;
  host::DiscoveryOptions options;
  options.plugin_paths = {dir.string()};
  options.env_path = "";
  options.install_dir = fs::path();
  options.exe_relative_dir = fs::path();
  host::PluginRegistry registry = host::PluginRegistry::discover(options, services);
  EXPECT_NE(registry.find("testgood"), nullptr);
  ASSERT_EQ(registry.skipped().size(), 1u);
  EXPECT_HAS(registry.skipped().at(0).reason, half.string() + " is damaged or not a plugin for this machine");
  EXPECT_HAS(registry.skipped().at(0).reason, "reinstall the plugin's package");
}

}  // namespace
}  // namespace tandem::test
