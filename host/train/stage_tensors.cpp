// send_stage_tensors and receive_stage_tensors: a header, then each
// tensor's bytes, in the header's order.
#include "train/stage_tensors.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace tandem::host::train {
namespace {

using json = nlohmann::json;

Result<void> send(exec::StageLink& link, const void* data, size_t bytes, int to, const std::string& what) {
  auto started = link.start_send(data, bytes, to);
  if (!started) return started.error();
  return exec::wait_until_finished(**started, link.timeout_seconds(), link.stage(), what);
}

Result<void> receive(exec::StageLink& link, void* data, size_t bytes, int from, const std::string& what) {
  auto started = link.start_receive(data, bytes, from);
  if (!started) return started.error();
  return exec::wait_until_finished(**started, link.timeout_seconds(), link.stage(), what);
}

}  // namespace

Result<void> send_stage_tensors(exec::StageLink& link, const checkpoint::Checkpoint& cp, int to) {
  json tensors = json::array();
  for (const checkpoint::TensorRecord& t : cp.tensors)
    tensors.push_back(
        {{"name", t.name}, {"dtype", int(t.dtype)}, {"shape", t.shape}, {"bytes", t.data.size()}});
  const std::string header = tensors.dump();
  const uint64_t length = header.size();
  const std::string what = "the checkpoint's tensors sent to stage " + std::to_string(to);
  if (auto r = send(link, &length, sizeof length, to, what); !r) return r;
  if (auto r = send(link, header.data(), header.size(), to, what); !r) return r;
  for (const checkpoint::TensorRecord& t : cp.tensors)
    if (auto r = send(link, t.data.data(), t.data.size(), to, what + " ('" + t.name + "')"); !r) return r;
  return {};
}

Result<void> receive_stage_tensors(exec::StageLink& link, checkpoint::Checkpoint& cp, int from) {
  const std::string what = "the checkpoint's tensors of stage " + std::to_string(from);
  uint64_t length = 0;
  if (auto r = receive(link, &length, sizeof length, from, what); !r) return r;
  std::string header(length, '\0');
  if (auto r = receive(link, header.data(), header.size(), from, what); !r) return r;
  const json tensors = json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!tensors.is_array())
    return make_error(what + ": the header is not a list of tensors (internal)", TDM_INTERNAL);
  for (const json& entry : tensors) {
    checkpoint::TensorRecord t;
    try {
      t.name = entry.at("name").get<std::string>();
      t.dtype = tdm_dtype(entry.at("dtype").get<int>());
      t.shape = entry.at("shape").get<std::vector<int64_t>>();
      t.data.resize(entry.at("bytes").get<size_t>());
    } catch (const json::exception& e) {
      return make_error(what + ": a header entry without " + e.what() + " (internal)", TDM_INTERNAL);
    }
    if (auto r = receive(link, t.data.data(), t.data.size(), from, what + " ('" + t.name + "')"); !r)
      return r;
    cp.tensors.push_back(std::move(t));
  }
  return {};
}

}  // namespace tandem::host::train
