// Loading good plugins: metadata, ABI negotiation, duplicates, search order.
#include <gtest/gtest.h>

#include <cstdlib>

#include "plugin/registry.hpp"
#include "tandem/plugin_check.hpp"
#include "test_support.hpp"
#include "util/logger.hpp"

namespace tandem::test {
namespace {

using host::DiscoveryOptions;
using host::HostServices;
using host::PluginRegistry;

TEST(Loader, GoodPluginLoadsWithMetadata) {
  ScratchDir scratch;
  fs::path dir = scratch.dir("a");
  fs::path file = ScratchDir::copy(built_plugin("good", "testgood"), dir, "libtandem-testgood.so");
  HostServices services;
  DiscoveryOptions options = isolated_options();
  options.plugin_paths = {dir.string()};
  PluginRegistry registry = PluginRegistry::discover(options, services);

  const host::LoadedPlugin* p = registry.find("testgood");
  ASSERT_NE(p, nullptr) << (registry.candidates().empty() ? "" : registry.candidates()[0].reason);
  EXPECT_EQ(p->kind, TDM_PLUGIN_BACKEND);
  EXPECT_EQ(p->version, "0.0.1");
  EXPECT_EQ(p->sdk_version, TDM_SDK_VERSION);
  EXPECT_EQ(p->description, "loader test backend");
  EXPECT_EQ(p->path, file);
  EXPECT_EQ(p->abi_major, 1u);
  EXPECT_EQ(p->abi_minor, static_cast<uint32_t>(TDM_ABI_MINOR));
  EXPECT_EQ(p->abi_minor_effective, static_cast<uint32_t>(TDM_ABI_MINOR));
  EXPECT_TRUE(p->initialized);
  ASSERT_NE(p->backend, nullptr);
  EXPECT_EQ(registry.by_kind(TDM_PLUGIN_BACKEND).size(), 1u);
  EXPECT_TRUE(registry.by_kind(TDM_PLUGIN_FEATURE).empty());
  ASSERT_EQ(registry.candidates().size(), 1u);
  EXPECT_TRUE(registry.candidates()[0].loaded);
  EXPECT_EQ(registry.candidates()[0].origin, "--plugin-path");
}

TEST(Loader, Abi10PluginNegotiatesMinorZero) {
  ScratchDir scratch;
  fs::path dir = scratch.dir("a");
  ScratchDir::copy(built_plugin("abi10", "testabi10"), dir, "libtandem-testabi10.so");
  HostServices services;
  DiscoveryOptions options = isolated_options();
  options.plugin_paths = {dir.string()};
  PluginRegistry registry = PluginRegistry::discover(options, services);

  const host::LoadedPlugin* p = registry.find("testabi10");
  ASSERT_NE(p, nullptr) << registry.candidates().at(0).reason;
  EXPECT_EQ(p->abi_minor, 0u);
  EXPECT_EQ(p->abi_minor_effective, 0u);
  EXPECT_EQ(p->sdk_version, "1.0.0");
  // The table is the ABI 1.0 size exactly: smaller than this host's.
  EXPECT_EQ(p->backend->struct_size, plugin_check::abi10::kBackendApiSize);
  EXPECT_LT(p->backend->struct_size, sizeof(tdm_backend_api));
}

TEST(Loader, DuplicateNameFirstInSearchOrderWins) {
  ScratchDir scratch;
  fs::path a = scratch.dir("a");
  fs::path b = scratch.dir("b");
  fs::path first = ScratchDir::copy(built_plugin("good", "testgood"), a, "libtandem-testgood.so");
  fs::path second = ScratchDir::copy(built_plugin("good", "testgood"), b, "libtandem-testgood.so");
  HostServices services;
  DiscoveryOptions options = isolated_options();
  options.plugin_paths = {a.string() + ":" + b.string()};
  PluginRegistry registry = PluginRegistry::discover(options, services);

  ASSERT_NE(registry.find("testgood"), nullptr);
  EXPECT_EQ(registry.find("testgood")->path, first);
  ASSERT_EQ(registry.skipped().size(), 1u);
  EXPECT_EQ(registry.skipped()[0].path, second);
  EXPECT_EQ(registry.skipped()[0].reason, "duplicate of testgood already loaded from " + first.string());
}

TEST(Loader, DuplicateByDescriptorNameUnderAnotherFileName) {
  ScratchDir scratch;
  fs::path a = scratch.dir("a");
  fs::path b = scratch.dir("b");
  fs::path first = ScratchDir::copy(built_plugin("good", "testgood"), a, "libtandem-testgood.so");
  ScratchDir::copy(built_plugin("good", "testgood"), b, "libtandem-alias.so");
  HostServices services;
  DiscoveryOptions options = isolated_options();
  options.plugin_paths = {a.string(), b.string()};
  PluginRegistry registry = PluginRegistry::discover(options, services);

  ASSERT_EQ(registry.plugins().size(), 1u);
  ASSERT_EQ(registry.skipped().size(), 1u);
  EXPECT_EQ(registry.skipped()[0].reason, "duplicate of testgood already loaded from " + first.string());
}

TEST(Loader, NameMismatchIsAWarningOnly) {
  ScratchDir scratch;
  fs::path a = scratch.dir("a");
  ScratchDir::copy(built_plugin("good", "testgood"), a, "libtandem-alias.so");
  std::vector<std::string> lines;
  host::Logger::global().set_sink([&](host::LogLevel, const std::string& line) { lines.push_back(line); });
  HostServices services;
  DiscoveryOptions options = isolated_options();
  options.plugin_paths = {a.string()};
  PluginRegistry registry = PluginRegistry::discover(options, services);
  host::Logger::global().set_sink({});

  ASSERT_NE(registry.find("testgood"), nullptr);
  bool warned = false;
  for (const std::string& l : lines)
    if (l.find("reports the name 'testgood'") != std::string::npos &&
        l.find("libtandem-alias.so") != std::string::npos)
      warned = true;
  EXPECT_TRUE(warned);
}

// --plugin-path beats TANDEM_PLUGIN_PATH beats the build tree (a system
// directory, as the install directory): a user's directory adds plugins,
// and replaces one of the system directories' only with --override-plugin.
TEST(Loader, DiscoveryOrder) {
  ScratchDir scratch;
  fs::path cli = scratch.dir("cli");
  fs::path env = scratch.dir("env");
  fs::path build = scratch.dir("build");
  fs::path from_cli = ScratchDir::copy(built_plugin("good", "testgood"), cli, "libtandem-testgood.so");
  fs::path from_env = ScratchDir::copy(built_plugin("good", "testgood"), env, "libtandem-testgood.so");
  fs::path from_build = ScratchDir::copy(built_plugin("good", "testgood"), build, "libtandem-testgood.so");

  HostServices services;
  DiscoveryOptions options = isolated_options();
  options.plugin_paths = {cli.string()};
  options.env_path = env.string();
  options.exe_relative_dir = build;
  {  // without the override, both user copies are refused by name
    PluginRegistry r = PluginRegistry::discover(options, services);
    ASSERT_NE(r.find("testgood"), nullptr);
    EXPECT_EQ(r.find("testgood")->path, from_build);
    ASSERT_EQ(r.skipped().size(), 2u);
    for (const host::Candidate& c : r.skipped())
      EXPECT_NE(c.reason.find("like the installed plugin " + from_build.string()), std::string::npos)
          << c.reason;
  }
  options.override_plugins = {"testgood"};
  {
    PluginRegistry r = PluginRegistry::discover(options, services);
    ASSERT_NE(r.find("testgood"), nullptr);
    EXPECT_EQ(r.find("testgood")->path, from_cli);
    EXPECT_EQ(r.skipped().size(), 2u);  // duplicates of the first
  }
  options.plugin_paths.clear();
  {
    PluginRegistry r = PluginRegistry::discover(options, services);
    ASSERT_NE(r.find("testgood"), nullptr);
    EXPECT_EQ(r.find("testgood")->path, from_env);
  }
  options.env_path = "";
  {
    PluginRegistry r = PluginRegistry::discover(options, services);
    ASSERT_NE(r.find("testgood"), nullptr);
    EXPECT_EQ(r.find("testgood")->path, from_build);
    EXPECT_EQ(r.candidates().at(0).origin, "build tree");
  }
  // The real environment variable, read when no override is given.
  options.env_path.reset();
  ASSERT_EQ(
      ::setenv("TANDEM_PLUGIN_PATH", ((scratch.path() / "missing").string() + ":" + env.string()).c_str(), 1),
      0);
  {
    PluginRegistry r = PluginRegistry::discover(options, services);
    ASSERT_NE(r.find("testgood"), nullptr);
    EXPECT_EQ(r.find("testgood")->path, from_env);
  }
  ::unsetenv("TANDEM_PLUGIN_PATH");
}

// The same directory given as --plugin-path and found as the build tree
// holds the system's own files: nothing is shadowed, nothing refused.
TEST(Loader, APluginPathThatIsTheBuildTreeShadowsNothing) {
  ScratchDir scratch;
  fs::path build = scratch.dir("build");
  ScratchDir::copy(built_plugin("good", "testgood"), build, "libtandem-testgood.so");
  HostServices services;
  DiscoveryOptions options = isolated_options();
  options.plugin_paths = {build.string()};
  options.exe_relative_dir = build;
  PluginRegistry r = PluginRegistry::discover(options, services);
  ASSERT_NE(r.find("testgood"), nullptr);
  EXPECT_TRUE(r.skipped().empty());
}

TEST(SearchPath, OrderNotesAndDefaults) {
  ScratchDir scratch;
  fs::path a = scratch.dir("a");
  fs::path b = scratch.dir("b");
  DiscoveryOptions options = isolated_options();
  options.plugin_paths = {a.string() + ":" + (scratch.path() / "nope").string(), b.string()};
  options.env_path = a.string();
  options.install_dir = fs::path("/nonexistent/tandem/plugins");
  options.exe_relative_dir = b;
  std::vector<host::SearchDir> dirs = host::plugin_search_dirs(options);
  ASSERT_EQ(dirs.size(), 6u);
  EXPECT_EQ(dirs[0].path, a);
  EXPECT_EQ(dirs[0].origin, "--plugin-path");
  EXPECT_EQ(dirs[1].note, "does not exist");
  EXPECT_EQ(dirs[2].path, b);
  EXPECT_EQ(dirs[3].origin, "TANDEM_PLUGIN_PATH");
  EXPECT_NE(dirs[3].note.find("already searched"), std::string::npos);
  EXPECT_EQ(dirs[4].origin, "install directory");
  EXPECT_EQ(dirs[5].origin, "build tree");

  EXPECT_TRUE(host::default_install_dir().is_absolute());
  fs::path exe = fs::read_symlink("/proc/self/exe");
  EXPECT_EQ(host::default_exe_relative_dir(),
            (exe.parent_path() / ".." / "lib/tandem/plugins").lexically_normal());
  EXPECT_EQ(host::plugin_name_from_file("/x/libtandem-cuda.so"), "cuda");
  EXPECT_EQ(host::plugin_name_from_file("/x/libtandem-.so"), "");
  EXPECT_EQ(host::plugin_name_from_file("/x/libcuda.so"), "");
}

}  // namespace
}  // namespace tandem::test
