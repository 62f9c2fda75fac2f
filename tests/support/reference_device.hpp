// The reference backend from the build tree, for tests that run graphs.
#pragma once

#include <gtest/gtest.h>

#include <optional>

#include "device/device.hpp"
#include "plugin/registry.hpp"

namespace tandem::test {

class ReferenceDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    host::DiscoveryOptions options;
    options.plugin_paths = {TANDEM_BUILD_PLUGIN_DIR};
    options.env_path = "";
    options.install_dir = std::filesystem::path();
    options.exe_relative_dir = std::filesystem::path();
    options.allow_insecure = true;  // a umask 002 build tree is group-writable; not what these tests check
    registry_.emplace(host::PluginRegistry::discover(options, services_));
    const host::LoadedPlugin* reference = registry_->find("reference");
    ASSERT_NE(reference, nullptr) << "reference plugin not found in " << TANDEM_BUILD_PLUGIN_DIR;
    auto device = host::DeviceHandle::open(*reference, 0);
    ASSERT_TRUE(device.ok()) << device.error().message;
    device_.emplace(std::move(device.value()));
  }
  void TearDown() override { device_.reset(); }

  host::HostServices services_;
  std::optional<host::PluginRegistry> registry_;
  std::optional<host::DeviceHandle> device_;
};

}  // namespace tandem::test
