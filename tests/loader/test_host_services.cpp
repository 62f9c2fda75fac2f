// The tdm_host_api table as a plugin sees it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>

#include "plugin/call_window.hpp"
#include "plugin/host_services.hpp"
#include "plugin/run_access.hpp"
#include "tandem/version.h"
#include "util/last_error.hpp"
#include "util/logger.hpp"

namespace tandem::test {
namespace {

using host::clear_last_error;
using host::HostServices;
using host::last_error_text;
using host::PluginContext;
using host::silent_failure;

TEST(HostServices, TableIsComplete) {
  HostServices services;
  const tdm_host_api& api = services.create_context("demo", "/x/libtandem-demo.so").api;
  EXPECT_EQ(api.struct_size, sizeof(tdm_host_api));
  EXPECT_EQ(api.abi_major, static_cast<uint32_t>(TDM_ABI_MAJOR));
  EXPECT_EQ(api.abi_minor, static_cast<uint32_t>(TDM_ABI_MINOR));
  EXPECT_NE(api.ctx, nullptr);
  EXPECT_NE(api.log, nullptr);
  EXPECT_NE(api.set_error, nullptr);
  EXPECT_NE(api.config_get, nullptr);
  EXPECT_NE(api.scratch_alloc, nullptr);
  EXPECT_NE(api.scratch_free, nullptr);
  ASSERT_NE(api.graph, nullptr);
  EXPECT_EQ(api.graph->struct_size, sizeof(tdm_graph_api));
  EXPECT_NE(api.run_scalar_get, nullptr);
  EXPECT_NE(api.run_scalar_set, nullptr);
}

TEST(HostServices, ConfigGetBufferProtocol) {
  HostServices services;
  services.config().set("features.amp.dtype", "bf16");
  const tdm_host_api& api = services.create_context("amp", "").api;

  char buffer[16];
  std::memset(buffer, 'x', sizeof buffer);
  size_t size = 3;  // too small for "bf16\0"
  EXPECT_EQ(api.config_get(api.ctx, "features.amp.dtype", buffer, &size), TDM_INVALID_ARGUMENT);
  EXPECT_EQ(size, 5u);
  EXPECT_EQ(buffer[0], 'x');  // nothing written

  size = 0;  // size query without a buffer
  EXPECT_EQ(api.config_get(api.ctx, "features.amp.dtype", nullptr, &size), TDM_INVALID_ARGUMENT);
  EXPECT_EQ(size, 5u);

  size = 5;  // exactly enough
  EXPECT_EQ(api.config_get(api.ctx, "features.amp.dtype", buffer, &size), TDM_OK);
  EXPECT_STREQ(buffer, "bf16");
  EXPECT_EQ(size, 5u);

  size = sizeof buffer;
  EXPECT_EQ(api.config_get(api.ctx, "features.amp.missing", buffer, &size), TDM_NOT_FOUND);
  EXPECT_EQ(api.config_get(api.ctx, nullptr, buffer, &size), TDM_INVALID_ARGUMENT);
}

TEST(HostServices, ConfigSection) {
  host::ConfigStore store;
  store.set("plugins.cuda.streams", "4");
  store.set("plugins.cuda.graphs", "on");
  store.set("plugins.cudax.other", "1");
  store.set("plugins.cud", "1");
  auto section = store.section("plugins.cuda");
  ASSERT_EQ(section.size(), 2u);
  EXPECT_EQ(section["streams"], "4");
  host::ConfigSectionView view(section);
  ASSERT_EQ(view.get()->n_entries, 2u);
  EXPECT_STREQ(view.get()->entries[0].key, "graphs");
  EXPECT_STREQ(view.get()->entries[0].value, "on");
}

TEST(HostServices, SetErrorIsAttributedAndThreadLocal) {
  HostServices services;
  const tdm_host_api& api = services.create_context("onednn", "/x/libtandem-onednn.so").api;
  host::clear_last_error();
  api.set_error(api.ctx, TDM_OUT_OF_MEMORY, "cannot allocate %zu bytes on %s", static_cast<size_t>(4096),
                "cpu:0");

  std::thread other([] { EXPECT_FALSE(host::take_last_error().has_value()); });
  other.join();

  std::optional<host::LastError> e = host::take_last_error();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, TDM_OUT_OF_MEMORY);
  EXPECT_EQ(e->source, "onednn");
  EXPECT_EQ(e->message, "cannot allocate 4096 bytes on cpu:0");
  EXPECT_FALSE(host::take_last_error().has_value());  // taking clears

  api.set_error(api.ctx, TDM_INTERNAL, "%s", std::string(5000, 'a').c_str());  // longer than any fixed buffer
  EXPECT_EQ(host::last_error_text("none"), "[onednn] " + std::string(5000, 'a'));
  EXPECT_EQ(host::last_error_text("none"), "none");
}

// A feature pass whose graph insert the host refused reports its own
// failure; the host's reason for refusing stays in the message.
TEST(HostServices, APluginsErrorKeepsTheReasonTheGraphGaveIt) {
  host::clear_last_error();
  host::record_last_error(TDM_INVALID_ARGUMENT, "graph", "node name 'fc1.bf16' is used twice");
  host::record_last_error(TDM_INVALID_ARGUMENT, "amp", "graph edit: inserting node 'fc1.bf16' failed");
  EXPECT_EQ(host::last_error_text(""),
            "[amp] graph edit: inserting node 'fc1.bf16' failed: node name 'fc1.bf16' is used twice");
  host::record_last_error(TDM_INVALID_ARGUMENT, "amp", "bad config");
  EXPECT_EQ(host::last_error_text(""), "[amp] bad config") << "nothing from the graph: nothing added";
}

// A failure the plugin gave no message for says which status it was and how
// a plugin gives one, instead of a bare number.
TEST(HostServices, ASilentFailureNamesItsStatusAndWhatThePluginShouldDo) {
  const std::string oom = silent_failure(TDM_OUT_OF_MEMORY);
  EXPECT_NE(oom.find("TDM_OUT_OF_MEMORY"), std::string::npos) << oom;
  EXPECT_NE(oom.find("the plugin gave no message"), std::string::npos) << oom;
  EXPECT_NE(oom.find("set_error on the thread that returns the status"), std::string::npos) << oom;
  EXPECT_EQ(silent_failure(TDM_INTERNAL).rfind("TDM_INTERNAL (", 0), 0u);
  EXPECT_EQ(silent_failure(static_cast<tdm_status>(42)).rfind("status 42 (", 0), 0u);
  clear_last_error();
  EXPECT_EQ(last_error_text(silent_failure(TDM_TIMEOUT)).rfind("TDM_TIMEOUT (", 0), 0u);
}

TEST(HostServices, LogLinesNamePlugin) {
  HostServices services;
  const tdm_host_api& api = services.create_context("onednn", "").api;
  std::vector<std::string> lines;
  host::Logger::global().set_sink([&](host::LogLevel, const std::string& line) { lines.push_back(line); });
  host::Logger::global().set_level(host::LogLevel::info);
  api.log(api.ctx, TDM_LOG_INFO, "using brgemm");
  api.log(api.ctx, TDM_LOG_DEBUG, "filtered out");
  host::Logger::global().set_level(host::LogLevel::warning);
  api.log(api.ctx, TDM_LOG_INFO, "filtered out too");
  api.log(api.ctx, TDM_LOG_WARNING, "slow path");
  host::Logger::global().set_sink({});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "tandem: [onednn] using brgemm");
  EXPECT_EQ(lines[1], "tandem: [onednn] warning: slow path");
}

TEST(HostServices, ScratchIsAligned) {
  HostServices services;
  const tdm_host_api& api = services.create_context("x", "").api;
  void* p = api.scratch_alloc(api.ctx, 100, 0);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::memset(p, 1, 100);
  api.scratch_free(api.ctx, p);
  p = api.scratch_alloc(api.ctx, 10, 4096);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  api.scratch_free(api.ctx, p);
  EXPECT_EQ(api.scratch_alloc(api.ctx, 10, 96), nullptr);  // not a power of two
  api.scratch_free(api.ctx, nullptr);
}

TEST(HostServices, RunAccess) {
  HostServices services;
  const tdm_host_api& api = services.create_context("amp", "").api;
  host::MapRunAccess scalars;
  scalars.define("amp.loss_scale", 65536.0);
  double value = 0;
  // Outside a hook (a tdm_run* kept after it), and from a helper thread
  // during one: refused with the rule.
  host::clear_last_error();
  EXPECT_EQ(api.run_scalar_get(api.ctx, scalars.as_c(), "amp.loss_scale", &value), TDM_INVALID_ARGUMENT);
  const std::string why = host::last_error_text("");
  EXPECT_NE(why.find("run_scalar_get outside a step hook"), std::string::npos) << why;
  host::CallWindow hook(host::CallWindow::kStepHook, scalars.as_c());  // as the host opens it around a hook
  tdm_status from_helper = TDM_OK;
  std::thread([&] {
    from_helper = api.run_scalar_set(api.ctx, scalars.as_c(), "amp.loss_scale", 1.0);
  }).join();
  EXPECT_EQ(from_helper, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(*scalars.get("amp.loss_scale"), 65536.0);
  EXPECT_EQ(api.run_scalar_get(api.ctx, scalars.as_c(), "amp.loss_scale", &value), TDM_OK);
  EXPECT_EQ(value, 65536.0);
  EXPECT_EQ(api.run_scalar_set(api.ctx, scalars.as_c(), "amp.loss_scale", 32768.0), TDM_OK);
  EXPECT_EQ(*scalars.get("amp.loss_scale"), 32768.0);
  host::clear_last_error();
  EXPECT_EQ(api.run_scalar_get(api.ctx, scalars.as_c(), "nope", &value), TDM_NOT_FOUND);
  EXPECT_EQ(host::last_error_text(""), "[amp] no run scalar named 'nope'");
  EXPECT_EQ(api.run_scalar_set(api.ctx, scalars.as_c(), "nope", 1.0), TDM_NOT_FOUND);
  EXPECT_EQ(api.run_scalar_get(api.ctx, nullptr, "amp.loss_scale", &value), TDM_INVALID_ARGUMENT);
}

// Whole tensors (ABI 1.12): only at a step boundary (on_step_begin,
// on_step_end, on_run_end), exactly the value's size, its dims kept.
TEST(HostServices, RunTensorsOnlyAtAStepBoundary) {
  HostServices services;
  const tdm_host_api& api = services.create_context("ema", "").api;
  host::MapRunAccess run;
  run.define_tensor("fc.weight", host::TensorType{TDM_F32, {2, 3}}, std::vector<unsigned char>(24, 7));
  float w[6] = {};
  host::CallWindow hook(host::CallWindow::kStepHook, run.as_c());  // a hook, but micro_batch_end
  host::clear_last_error();
  EXPECT_EQ(api.run_tensor_read(api.ctx, run.as_c(), "fc.weight", w, sizeof w), TDM_INVALID_ARGUMENT);
  const std::string why = host::last_error_text("");
  EXPECT_NE(why.find("run_tensor_read outside a step boundary"), std::string::npos) << why;
  EXPECT_NE(why.find("on_step_begin, on_step_end or on_run_end"), std::string::npos) << why;

  host::CallWindow boundary(host::CallWindow::kStepBoundary, run.as_c());
  tdm_tensor_desc d{};
  d.struct_size = sizeof d;
  ASSERT_EQ(api.run_tensor_desc(api.ctx, run.as_c(), "fc.weight", &d), TDM_OK);
  EXPECT_EQ(d.dtype, TDM_F32);
  ASSERT_EQ(d.rank, 2u);
  const int64_t* dims = d.dims;
  EXPECT_EQ(dims[0], 2);
  EXPECT_EQ(dims[1], 3);
  ASSERT_EQ(api.run_tensor_desc(api.ctx, run.as_c(), "fc.weight", &d), TDM_OK);
  EXPECT_EQ(d.dims, dims) << "the dims stay where the first answer put them";
  ASSERT_EQ(api.run_tensor_read(api.ctx, run.as_c(), "fc.weight", w, sizeof w), TDM_OK);
  EXPECT_EQ(std::memcmp(w, std::vector<unsigned char>(24, 7).data(), 24), 0);
  const float ones[6] = {1, 1, 1, 1, 1, 1};
  ASSERT_EQ(api.run_tensor_write(api.ctx, run.as_c(), "fc.weight", ones, sizeof ones), TDM_OK);
  EXPECT_EQ(std::memcmp(run.tensor("fc.weight").data(), ones, sizeof ones), 0);

  host::clear_last_error();
  EXPECT_EQ(api.run_tensor_read(api.ctx, run.as_c(), "fc.weight", w, 20), TDM_INVALID_ARGUMENT);
  EXPECT_NE(host::last_error_text("").find("not 20"), std::string::npos);
  EXPECT_EQ(api.run_tensor_read(api.ctx, run.as_c(), "nope", w, sizeof w), TDM_NOT_FOUND);
  // The plugin's own message about the failure keeps the host's reason.
  api.set_error(api.ctx, TDM_NOT_FOUND, "ema: reading nope failed");
  EXPECT_EQ(host::last_error_text(""),
            "[ema] ema: reading nope failed: run_tensor_read: no tensor named 'nope'");
  // This run has no directory: nothing is written.
  const tdm_saved_tensor t{sizeof(tdm_saved_tensor), "fc.weight", "fc.weight"};
  EXPECT_EQ(api.run_save_tensors(api.ctx, run.as_c(), "ema.safetensors", &t, 1), TDM_UNSUPPORTED);
  const tdm_saved_tensor unnamed{sizeof(tdm_saved_tensor), nullptr, "fc.weight"};
  host::clear_last_error();
  EXPECT_EQ(api.run_save_tensors(api.ctx, run.as_c(), "ema.safetensors", &unnamed, 1), TDM_INVALID_ARGUMENT);
  EXPECT_NE(host::last_error_text("").find("tensor 0 of the list has no name"), std::string::npos);
  std::thread([&] {
    EXPECT_EQ(api.run_tensor_write(api.ctx, run.as_c(), "fc.weight", ones, sizeof ones),
              TDM_INVALID_ARGUMENT);
  }).join();
}

}  // namespace
}  // namespace tandem::test
