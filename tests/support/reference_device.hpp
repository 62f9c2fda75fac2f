// The reference backend from the build tree, for tests that run graphs.
#pragma once

#include <gtest/gtest.h>

#include <optional>

#include "build_plugins.hpp"
#include "device/device.hpp"
#include "plugin/registry.hpp"

namespace tandem::test {

class ReferenceDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.emplace(build_plugins(services_));
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
