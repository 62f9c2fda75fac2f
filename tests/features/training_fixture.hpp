// Feature plugins through the real trainer on the reference backend: the
// plugins of this build, one reference device, a temporary run directory.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "build_plugins.hpp"
#include "device/device.hpp"
#include "model/model_parser.hpp"
#include "plugin/registry.hpp"
#include "temp_dir.hpp"
#include "train/trainer.hpp"

namespace tandem::test {

class TrainingOnReference : public ::testing::Test {
 protected:
  // Skips the test when `plugin` (or the `backend` plugin) is not part of
  // this build; `backend` becomes the one trainer() uses.
  void load(const std::string& plugin, const std::string& backend = "reference") {
    load_all({plugin}, backend);
  }
  void load_all(const std::vector<std::string>& plugins, const std::string& backend) {
    registry_.emplace(build_plugins(services_));
    std::vector<std::string> needed = plugins;
    needed.push_back(backend);
    for (const std::string& name : needed)
      if (registry_->find(name) == nullptr)
        GTEST_SKIP() << "the " << name << " plugin is not part of this build";
    backend_ = backend;
  }

  // Device 0 of `backend`, opened once.
  const host::DeviceHandle& device(const std::string& backend) {
    auto it = devices_.find(backend);
    if (it == devices_.end()) {
      auto d = host::DeviceHandle::open(*registry_->find(backend), 0);
      EXPECT_TRUE(d.ok()) << d.error().message;
      it = devices_.emplace(backend, std::make_unique<host::DeviceHandle>(std::move(d.value()))).first;
    }
    return *it->second;
  }

  // Why device 0 of `backend` has no bf16 kernels on this CPU, or "" when it
  // has them. oneDNN's need AVX-512 (avx512_core or newer), which the
  // device's FEATURES (ABI 1.4) name; ONEDNN_MAX_CPU_ISA can take it away.
  std::string no_bf16_reason(const std::string& backend) {
    if (backend != "onednn") return "";
    auto info = device(backend).info();
    if (!info) return info.error().message;
    if (info->features.find("avx512_core") != std::string::npos) return "";
    return "onednn:0 has no bf16 kernels on this CPU (its features: " + info->features + ")";
  }

  // A trainer for `model` (TOML text) with `overrides` (--set syntax), on
  // the loaded backend or on `backend`.
  host::Result<std::unique_ptr<host::train::Trainer>> trainer(const std::string& model,
                                                              const std::vector<std::string>& overrides) {
    return trainer_on(backend_, model, overrides);
  }
  host::Result<std::unique_ptr<host::train::Trainer>> trainer_on(const std::string& backend,
                                                                 const std::string& model,
                                                                 const std::vector<std::string>& overrides) {
    auto spec = host::model::parse_model_text(model, "model.toml", overrides);
    if (!spec) return spec.error();
    specs_.push_back(std::make_unique<host::model::ModelSpec>(std::move(*spec)));
    host::train::TrainOptions o = options_;
    o.run_dir = dir_.file("run" + std::to_string(specs_.size()));
    return host::train::Trainer::create(*specs_.back(), device(backend), *registry_, o);
  }

  // The values of a parameter or state tensor of a trained model.
  template <class T = float>
  std::vector<T> read(host::train::Trainer& t, const std::string& name) {
    const host::Value* v = t.model().graph.value_by_name(name);
    EXPECT_NE(v, nullptr) << name;
    if (v == nullptr) return {};
    size_t n = 1;
    for (int64_t d : v->type.dims) n *= static_cast<size_t>(d);
    std::vector<T> out(n);
    EXPECT_TRUE(t.executor().read(v->id, out.data(), n * sizeof(T)).ok());
    return out;
  }

  host::HostServices services_;
  std::optional<host::PluginRegistry> registry_;
  std::string backend_ = "reference";
  host::train::TrainOptions options_;  // what trainer() starts from (its run_dir is replaced)
  std::map<std::string, std::unique_ptr<host::DeviceHandle>> devices_;
  std::vector<std::unique_ptr<host::model::ModelSpec>> specs_;  // trainers keep a reference
  TempDir dir_;
};

}  // namespace tandem::test
