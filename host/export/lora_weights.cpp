#include "export/lora_weights.hpp"

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/atomic_file.hpp"
#include "checkpoint/float_tensors.hpp"
#include "export/hf_export.hpp"
#include "lowering/lora_base.hpp"

namespace tandem::host::exporting {
namespace {

using checkpoint::Checkpoint;
using checkpoint::TensorRecord;

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() > end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

// The targets that have adapters: "<target>" of each "<target>.lora_A".
std::vector<std::string> adapted(const Checkpoint& weights) {
  std::vector<std::string> targets;
  for (const TensorRecord& t : weights.tensors)
    if (ends_with(t.name, ".lora_A") && t.name.rfind("optim.", 0) != 0)
      targets.push_back(t.name.substr(0, t.name.size() - 7));
  return targets;
}

Result<std::pair<const TensorRecord*, const TensorRecord*>> adapter(const Checkpoint& weights,
                                                                    const std::string& target,
                                                                    const std::string& file) {
  const TensorRecord* a = weights.find(target + ".lora_A");
  const TensorRecord* b = weights.find(target + ".lora_B");
  if (a == nullptr || b == nullptr || a->dtype != TDM_F32 || b->dtype != TDM_F32 || a->shape.size() != 2 ||
      b->shape.size() != 2 || a->shape[0] != b->shape[1])
    return make_error(
        file + ": the adapter of '" + target + "' is not an f32 pair lora_A [r, in], lora_B [out, r]",
        TDM_INVALID_ARGUMENT);
  return std::pair{a, b};
}

// An INT8 base (lowering/lora_base.hpp) as the f32 weights the run
// computed with: q·scale per row, rounded once as the graph's mul does.
void dequantize_int8_bases(Checkpoint& cp) {
  std::set<std::string> scales;  // of the weights dequantized, dropped after
  for (TensorRecord& w : cp.tensors) {
    const TensorRecord* scale = cp.find(w.name + lowering::kInt8BaseScale);
    if (w.dtype != TDM_S8 || w.shape.size() != 2 || scale == nullptr || scale->dtype != TDM_F32 ||
        scale->shape != std::vector<int64_t>{w.shape[0]})
      continue;
    const auto* q = reinterpret_cast<const int8_t*>(w.data.data());
    const auto* s = reinterpret_cast<const float*>(scale->data.data());
    std::vector<std::byte> wide(w.data.size() * sizeof(float));
    auto* f = reinterpret_cast<float*>(wide.data());
    for (int64_t o = 0; o < w.shape[0]; ++o)
      for (int64_t i = 0; i < w.shape[1]; ++i) f[o * w.shape[1] + i] = float(q[o * w.shape[1] + i]) * s[o];
    w.dtype = TDM_F32;
    w.data = std::move(wide);
    scales.insert(scale->name);
  }
  std::erase_if(cp.tensors, [&](const TensorRecord& t) { return scales.count(t.name) > 0; });
}

}  // namespace

Result<Checkpoint> merged_lora(const Checkpoint& weights, const model::LoraSpec& lora,
                               const std::string& file) {
  Checkpoint out = weights;
  // A bf16 base widens as any bf16 tensor does.
  if (auto widened = checkpoint::widen_to_f32(out, file); !widened) return widened.error();
  dequantize_int8_bases(out);
  for (const std::string& target : adapted(weights)) {
    auto ab = adapter(weights, target, file);
    if (!ab) return ab.error();
    const auto [a, b] = *ab;
    TensorRecord* w = nullptr;
    for (TensorRecord& t : out.tensors)
      if (t.name == target + ".weight") w = &t;
    const int64_t r = a->shape[0], in = a->shape[1], rows = b->shape[0];
    if (w == nullptr || w->dtype != TDM_F32 || w->shape != std::vector<int64_t>{rows, in})
      return make_error(file + ": no f32 weight [" + std::to_string(rows) + ", " + std::to_string(in) +
                            "] '" + target + ".weight' for its adapter",
                        TDM_INVALID_ARGUMENT);
    const float* A = reinterpret_cast<const float*>(a->data.data());
    const float* B = reinterpret_cast<const float*>(b->data.data());
    float* W = reinterpret_cast<float*>(w->data.data());
    const double scale = lora.alpha / double(r);
    for (int64_t o = 0; o < rows; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double sum = 0;
        for (int64_t k = 0; k < r; ++k) sum += double(B[o * r + k]) * A[k * in + i];
        W[o * in + i] = float(W[o * in + i] + scale * sum);
      }
  }
  std::erase_if(out.tensors, [](const TensorRecord& t) {
    return ends_with(t.name, ".lora_A") || ends_with(t.name, ".lora_B");
  });
  return out;
}

Result<size_t> export_peft(const Checkpoint& weights, const std::string& file, const model::LoraSpec& lora,
                           const std::string& hf_dir, const std::string& output_dir) {
  auto config = hub::read_hf_config(hf_dir);
  if (!config) return config.error();
  Checkpoint adapters;
  adapters.metadata["format"] = "pt";
  nlohmann::json modules = nlohmann::json::array();
  for (const std::string& target : adapted(weights)) {
    auto ab = adapter(weights, target, file);
    if (!ab) return ab.error();
    auto weight = hf_name(target + ".weight", *config);  // "model.layers.0.self_attn.q_proj.weight"
    if (!weight)
      return make_error(file + ": the adapter of " + weight.error().message + ": PEFT cannot load it",
                        TDM_UNSUPPORTED);
    const std::string module = weight->substr(0, weight->size() - 7);
    modules.push_back(module);
    for (const TensorRecord* t : {ab->first, ab->second}) {
      TensorRecord copy = *t;
      copy.name = "base_model.model." + module + (t == ab->first ? ".lora_A.weight" : ".lora_B.weight");
      adapters.tensors.push_back(std::move(copy));
    }
  }
  if (adapters.tensors.empty())
    return make_error(file + ": has no LoRA adapters (was it trained with [features.lora]?)",
                      TDM_INVALID_ARGUMENT);
  const nlohmann::json adapter_config = {{"peft_type", "LORA"},
                                         {"task_type", "CAUSAL_LM"},
                                         {"base_model_name_or_path", hf_dir},
                                         {"r", lora.rank},
                                         {"lora_alpha", lora.alpha},
                                         {"lora_dropout", lora.dropout},
                                         {"target_modules", modules},
                                         {"bias", "none"},
                                         {"fan_in_fan_out", config->family == hub::Family::gpt2},
                                         {"inference_mode", true},
                                         {"init_lora_weights", true}};
  auto fill = [&](const std::string& staging) -> Result<void> {
    if (auto r = checkpoint::write_safetensors(staging + "/adapter_model.safetensors", adapters); !r)
      return r;
    return checkpoint::write_file_atomically(staging + "/adapter_config.json",
                                             {adapter_config.dump(2) + "\n"});
  };
  if (auto r = write_directory(output_dir, fill); !r) return r.error();
  return adapters.tensors.size();
}

}  // namespace tandem::host::exporting
