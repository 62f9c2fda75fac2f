// The ELF check of rule 11: a plugin file's headers read before dlopen.
#include "tandem/plugin_check.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace tandem::plugin_check {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
constexpr const char* kMachineName = "x86-64";
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
constexpr const char* kMachineName = "aarch64";
#else
#error "elf_check.cpp: add this machine's ELF e_machine"
#endif

Refusal damaged(const std::string& what) {
  return Refusal{what, TDM_INVALID_ARGUMENT};
}

// a + b <= limit, without overflow.
bool fits(uint64_t a, uint64_t b, uint64_t limit) {
  return a <= limit && b <= limit - a;
}

// The table of `count` entries of `entry_size` bytes at `offset`, in a file
// of `size` bytes: whether it lies inside.
bool table_fits(uint64_t offset, uint64_t count, uint64_t entry_size, uint64_t size) {
  if (entry_size != 0 && count > size / entry_size) return false;
  return fits(offset, count * entry_size, size);
}

Verdict check_header(const Elf64_Ehdr& h, uint64_t size) {
  if (std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0) return damaged("it is not an ELF file (no ELF magic)");
  if (h.e_ident[EI_CLASS] != ELFCLASS64) return damaged("it is not a 64-bit ELF file");
  if (h.e_ident[EI_DATA] != ELFDATA2LSB) return damaged("it is not a little-endian ELF file");
  if (h.e_type != ET_DYN)
    return damaged("it is an ELF file but not a shared library (e_type " + std::to_string(h.e_type) + ")");
  if (h.e_machine != kMachine)
    return damaged(std::string("it is a shared library for another machine (e_machine ") +
                   std::to_string(h.e_machine) + "; this host is " + kMachineName + ")");
  if (h.e_phentsize != sizeof(Elf64_Phdr) || h.e_phnum == 0 || h.e_phnum == PN_XNUM)
    return damaged("its program header table is malformed (" + std::to_string(h.e_phnum) + " entries of " +
                   std::to_string(h.e_phentsize) + " bytes)");
  if (!table_fits(h.e_phoff, h.e_phnum, h.e_phentsize, size))
    return damaged("it is cut short: its program header table ends past the end of the file (" +
                   std::to_string(size) + " bytes)");
  if (h.e_shoff != 0 && !table_fits(h.e_shoff, h.e_shnum, h.e_shentsize, size))
    return damaged("it is cut short: its section header table at byte " + std::to_string(h.e_shoff) +
                   " ends past the end of the file (" + std::to_string(size) + " bytes)");
  return std::nullopt;
}

Verdict check_segments(std::span<const Elf64_Phdr> phdrs, uint64_t size) {
  bool dynamic = false, loadable = false;
  for (size_t i = 0; i < phdrs.size(); ++i) {
    const Elf64_Phdr& p = phdrs[i];
    if (p.p_type == PT_NULL || p.p_type == PT_GNU_STACK) continue;  // no file bytes
    dynamic |= p.p_type == PT_DYNAMIC;
    loadable |= p.p_type == PT_LOAD;
    if (p.p_type == PT_LOAD && p.p_filesz > p.p_memsz)
      return damaged("segment " + std::to_string(i) + " is malformed (more file bytes than memory)");
    if (!fits(p.p_offset, p.p_filesz, size))
      return damaged("it is cut short: segment " + std::to_string(i) + " ends at byte " +
                     std::to_string(p.p_offset + p.p_filesz) + " but the file has " + std::to_string(size) +
                     " bytes");
  }
  if (!loadable) return damaged("it has no loadable segment");
  if (!dynamic) return damaged("it has no dynamic section (not a shared library)");
  return std::nullopt;
}

}  // namespace

Verdict check_elf_image(std::span<const uint8_t> head, uint64_t file_size) {
  if (head.size() < sizeof(Elf64_Ehdr) || file_size < sizeof(Elf64_Ehdr))
    return damaged("it is too short to be a shared library (" + std::to_string(file_size) + " bytes)");
  Elf64_Ehdr h;
  std::memcpy(&h, head.data(), sizeof h);
  if (Verdict r = check_header(h, file_size)) return r;
  if (!fits(h.e_phoff, uint64_t(h.e_phnum) * sizeof(Elf64_Phdr), head.size()))
    return damaged("its program header table lies beyond the bytes read");
  std::vector<Elf64_Phdr> phdrs(h.e_phnum);
  std::memcpy(phdrs.data(), head.data() + h.e_phoff, phdrs.size() * sizeof(Elf64_Phdr));
  return check_segments(phdrs, file_size);
}

Verdict check_plugin_file(const std::filesystem::path& file) {
  const std::string remedy = "; reinstall the plugin's package (or rebuild it), or remove the file";
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Refusal{file.string() + ": cannot open (" + std::strerror(errno) + ")", TDM_NOT_FOUND};
  struct stat st {};
  std::vector<uint8_t> head;
  bool read_ok = ::fstat(fd, &st) == 0;
  if (read_ok) {
    const uint64_t size = uint64_t(st.st_size);
    // The header, then through the program header table if it is within the file.
    head.resize(size_t(std::min<uint64_t>(size, sizeof(Elf64_Ehdr))));
    read_ok = ::pread(fd, head.data(), head.size(), 0) == ssize_t(head.size());
    if (read_ok && head.size() == sizeof(Elf64_Ehdr)) {
      Elf64_Ehdr h;
      std::memcpy(&h, head.data(), sizeof h);
      const uint64_t end = uint64_t(h.e_phoff) + uint64_t(h.e_phnum) * sizeof(Elf64_Phdr);
      if (h.e_phoff <= size && end <= size && end > head.size()) {
        head.resize(size_t(end));
        read_ok = ::pread(fd, head.data(), head.size(), 0) == ssize_t(head.size());
      }
    }
  }
  const int saved_errno = errno;
  ::close(fd);
  if (!read_ok)
    return Refusal{file.string() + ": cannot read (" + std::strerror(saved_errno) + ")" + remedy,
                   TDM_INVALID_ARGUMENT};
  if (Verdict r = check_elf_image(head, uint64_t(st.st_size)))
    return Refusal{file.string() + " is damaged or not a plugin for this machine: " + r->message + remedy,
                   TDM_INVALID_ARGUMENT};
  return std::nullopt;
}

}  // namespace tandem::plugin_check
