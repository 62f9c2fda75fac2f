// Tandem SDK — a vendor library opened when a device first needs it.
//
// Every `tandem` command loads every installed plugin and calls its `init`
// (sdk/ABI.md rule 12), `tandem plugins` and `tandem --help` included. A
// backend linked against a large vendor library (cuBLAS and cuDNN map
// hundreds of megabytes, and relocating them costs a process 200 MB of
// memory and tens of milliseconds) makes every command pay for it, on
// machines without the hardware too. So a plugin links only the vendor's
// headers and opens the library itself, by soname, when its first device is
// opened (rule 24): a CPU run pays nothing for an installed GPU plugin.
//
//   tandem::VendorLibrary& cublas() {
//     static tandem::VendorLibrary library("cuBLAS", {"libcublas.so.13"});
//     return library;
//   }
//   cublas().load();                  // in device_open; throws tandem::Error
//   TANDEM_VENDOR_FN(cublas(), cublasCreate_v2)(&handle);  // a call through it
//
// To keep the plugin's code as it reads against the vendor's documentation,
// a header of the plugin can define each function it calls as such a call:
//   #define cublasCreate_v2(...) TANDEM_VENDOR_FN(cublas(), cublasCreate_v2)(__VA_ARGS__)
// and is then the only place that includes the vendor header; a call it
// forgot fails to link (a plugin links with -Wl,--no-undefined).
//
// The library is found the way the dynamic loader finds a NEEDED entry
// (LD_LIBRARY_PATH, the ld.so cache), so a package depends on the vendor's
// package and carries no RUNPATH. `fallback_dirs` are tried after the
// sonames (a build tree against a toolkit outside the loader's paths).
#ifndef TANDEM_VENDOR_LIBRARY_HPP
#define TANDEM_VENDOR_LIBRARY_HPP

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tandem/tandem.hpp"

namespace tandem {

class VendorLibrary {
 public:
  VendorLibrary(std::string what, std::vector<std::string> sonames,
                std::vector<std::string> fallback_dirs = {})
      : what_(std::move(what)), sonames_(std::move(sonames)), fallback_dirs_(std::move(fallback_dirs)) {}
  VendorLibrary(const VendorLibrary&) = delete;
  VendorLibrary& operator=(const VendorLibrary&) = delete;
  // Never closed: a vendor runtime may have started threads (rule 12).
  ~VendorLibrary() = default;

  // Opens the library the first time (thread-safe); later calls return at
  // once. Throws tandem::Error(TDM_UNAVAILABLE) naming every file tried and
  // why, when none opens: the device cannot be used without it.
  void load() {
    std::call_once(once_, [this] { open(); });
    if (handle_ == nullptr) throw Error(TDM_UNAVAILABLE, failure_);
  }
  bool loaded() const noexcept { return handle_ != nullptr; }
  // The file that was opened ("" until then).
  const std::string& path() const noexcept { return path_; }

  // A function of the library (opening it first if need be). Throws when
  // the library cannot be opened, or lacks the function: an older version
  // than the plugin was built for.
  template <class Fn>
  Fn symbol(const char* name) {
    load();
    void* address = ::dlsym(handle_, name);
    if (address == nullptr)
      throw Error(TDM_UNAVAILABLE, what_ + " (" + path_ + ") has no function " + name +
                                       ": it is older than the version this plugin was built for");
    return reinterpret_cast<Fn>(address);
  }

 private:
  void open() {
    std::vector<std::string> candidates = sonames_;
    for (const std::string& dir : fallback_dirs_)
      for (const std::string& soname : sonames_) candidates.push_back(dir + "/" + soname);
    std::string tried;
    for (const std::string& file : candidates) {
      // RTLD_LOCAL: its symbols stay out of everyone else's way;
      // RTLD_NODELETE: never unmapped (see the destructor).
      handle_ = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
      if (handle_ != nullptr) {
        path_ = file;
        return;
      }
      const char* why = ::dlerror();
      tried += "\n  " + file + ": " + (why != nullptr ? why : "not found");
    }
    failure_ = what_ + " could not be loaded; tried:" + tried + "\ninstall " + what_ +
               " (the plugin's package depends on it), or add the directory that holds " + sonames_.front() +
               " to the loader's paths (/etc/ld.so.conf.d, or LD_LIBRARY_PATH)";
  }

  std::string what_;
  std::vector<std::string> sonames_;
  std::vector<std::string> fallback_dirs_;
  std::once_flag once_;
  void* handle_ = nullptr;
  std::string path_;
  std::string failure_;
};

}  // namespace tandem

// `fn` of the VendorLibrary `library` (an expression), looked up once per
// call site. decltype sees the vendor header's declaration of `fn`, so a
// call with the wrong arguments fails to compile as a direct call would.
#define TANDEM_VENDOR_FN(library, fn) TANDEM_VENDOR_FN_AS(library, fn, decltype(&::fn))
// The same for a name the header overloads (a C++ convenience overload
// beside the C function): `type`, a function pointer type, picks the C one.
#define TANDEM_VENDOR_FN_AS(library, fn, type)                               \
  ([] {                                                                      \
    static_assert(std::is_same_v<type, decltype(static_cast<type>(&::fn))>); \
    static const auto address = (library).symbol<type>(#fn);                 \
    return address;                                                          \
  }())

#endif
