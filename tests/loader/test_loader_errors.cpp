// Every refusal has its own message, naming the file and the way out.
#include <gtest/gtest.h>

#include <fstream>

#include "plugin/registry.hpp"
#include "test_support.hpp"

namespace tandem::test {
namespace {

using host::HostServices;
using host::PluginRegistry;

// Loads one file into a fresh registry and returns the skip reason.
std::string refusal(const fs::path& file, HostServices& services, bool allow_insecure = false) {
  PluginRegistry registry(services);
  host::Result<const host::LoadedPlugin*> r = registry.load(file, "test", allow_insecure);
  if (r) return "";
  EXPECT_EQ(registry.skipped().size(), 1u);
  EXPECT_EQ(registry.skipped().at(0).reason, r.error().message);
  return r.error().message;
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "missing '" << (part) << "' in: " << (text)

TEST(LoaderErrors, AbiMajorMismatch) {
  ScratchDir scratch;
  fs::path file =
      ScratchDir::copy(built_plugin("major2", "testmajor2"), scratch.dir("d"), "libtandem-testmajor2.so");
  HostServices services;
  std::string why = refusal(file, services);
  EXPECT_EQ(why, "plugin testmajor2 (" + file.string() +
                     ") was built for Tandem ABI 2.0; this host speaks ABI " + std::to_string(TDM_ABI_MAJOR) +
                     "." + std::to_string(TDM_ABI_MINOR) +
                     "; rebuild the plugin against SDK 1.x "
                     "or use a matching host");
}

TEST(LoaderErrors, NoEntrySymbol) {
  ScratchDir scratch;
  fs::path file =
      ScratchDir::copy(built_plugin("noentry", "testnoentry"), scratch.dir("d"), "libtandem-testnoentry.so");
  HostServices services;
  std::string why = refusal(file, services);
  EXPECT_HAS(why, file.string() + " is not a Tandem plugin: it does not export tdm_plugin_entry");
}

TEST(LoaderErrors, MissingDependency) {
  ScratchDir scratch;
  fs::path file = ScratchDir::copy(built_plugin("missingdep", "testmissingdep"), scratch.dir("d"),
                                   "libtandem-testmissingdep.so");
  HostServices services;
  std::string why = refusal(file, services);
  EXPECT_HAS(why, "cannot load plugin " + file.string());
  EXPECT_HAS(why, "libtandem_test_missing_dep.so: cannot open shared object file");
  EXPECT_HAS(why, "The plugin needs libtandem_test_missing_dep.so");
  EXPECT_HAS(why, "LD_LIBRARY_PATH");
}

TEST(LoaderErrors, WorldWritableFileRefusedUnlessAllowed) {
  ScratchDir scratch;
  fs::path file =
      ScratchDir::copy(built_plugin("good", "testgood"), scratch.dir("d"), "libtandem-testgood.so");
  ScratchDir::chmod(file, 0666);
  HostServices services;
  std::string why = refusal(file, services);
  EXPECT_HAS(why,
             "refusing plugin " + file.string() + ": " + file.string() + " is writable by group and others");
  EXPECT_HAS(why, "mode 0666");
  EXPECT_HAS(why, "chmod go-w " + file.string());
  EXPECT_HAS(why, "--allow-insecure-plugins");
  EXPECT_EQ(refusal(file, services, /*allow_insecure=*/true), "");
}

TEST(LoaderErrors, WorldWritableDirectoryRefused) {
  ScratchDir scratch;
  fs::path dir = scratch.dir("d");
  fs::path file = ScratchDir::copy(built_plugin("good", "testgood"), dir, "libtandem-testgood.so");
  ScratchDir::chmod(dir, 0777);
  HostServices services;
  std::string why = refusal(file, services);
  EXPECT_HAS(why, ": " + dir.string() + " is writable by group and others (mode 0777)");
  EXPECT_HAS(why, "chmod go-w " + dir.string());

  // Through discovery, with and without --allow-insecure-plugins.
  host::DiscoveryOptions options = isolated_options();
  options.plugin_paths = {dir.string()};
  EXPECT_EQ(PluginRegistry::discover(options, services).plugins().size(), 0u);
  options.allow_insecure = true;
  EXPECT_EQ(PluginRegistry::discover(options, services).plugins().size(), 1u);
}

TEST(LoaderErrors, EntryReturnsNullWithPluginMessage) {
  ScratchDir scratch;
  fs::path file =
      ScratchDir::copy(built_plugin("good", "testgood"), scratch.dir("d"), "libtandem-testgood.so");
  HostServices services;
  services.config().set("plugins.testgood.refuse", "1");
  std::string why = refusal(file, services);
  EXPECT_EQ(why, "plugin testgood (" + file.string() +
                     ") refused to load: [testgood] refusing to load because plugins.testgood.refuse is set");
}

TEST(LoaderErrors, FailingInitIsReportedAndSkipped) {
  ScratchDir scratch;
  fs::path file =
      ScratchDir::copy(built_plugin("good", "testgood"), scratch.dir("d"), "libtandem-testgood.so");
  HostServices services;
  services.config().set("plugins.testgood.fail_init", "1");
  std::string why = refusal(file, services);
  EXPECT_EQ(why,
            "plugin testgood (" + file.string() +
                ") failed to initialise: [testgood] init refused: fail_init is set in [plugins.testgood]");
}

TEST(LoaderErrors, NotAnElfFile) {
  ScratchDir scratch;
  fs::path dir = scratch.dir("d");
  fs::path file = dir / "libtandem-junk.so";
  { std::ofstream(file) << "not a library"; }
  ScratchDir::chmod(file, 0755);
  HostServices services;
  std::string why = refusal(file, services);
  // Refused by the ELF check of tandem/plugin_check.hpp, before dlopen.
  EXPECT_HAS(why, file.string() + " is damaged or not a plugin for this machine: it is too short");
  EXPECT_HAS(why, "remove the file");
}

// An ELF file that passes the header check but that dlopen still refuses
// (here a program, not a library): the loader's own reason and ldd.
TEST(LoaderErrors, AProgramIsNotAPlugin) {
  ScratchDir scratch;
  fs::path file = ScratchDir::copy("/bin/sh", scratch.dir("d"), "libtandem-sh.so");
  HostServices services;
  std::string why = refusal(file, services);
  EXPECT_HAS(why, "cannot load plugin " + file.string() + ": ");
  EXPECT_HAS(why, "ldd " + file.string());
}

}  // namespace
}  // namespace tandem::test
