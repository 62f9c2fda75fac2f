#include "place/fit_advice.hpp"

#include "util/format.hpp"

namespace tandem::host::place {

namespace {

std::string limit_kind(const FitContext& c, const std::string& device) {
  const auto kind = c.limit_kind.find(device);
  return kind == c.limit_kind.end() ? "" : kind->second;
}

std::string limit_text(const FitContext& c, const std::string& device, uint64_t limit) {
  const std::string k = limit_kind(c, device);
  if (k == "total") return "it has " + human_bytes(limit) + " in all";
  if (k == "free") return "it has " + human_bytes(limit) + " free";
  if (k == "held") return "it held " + human_bytes(limit) + " when it ran out";
  return "its budget is " + human_bytes(limit);
}

// The last remedy: a larger budget where the user set one, else more memory.
std::string larger_limit(const DeviceEstimate& d, uint64_t over, const FitContext& c) {
  const std::string k = limit_kind(c, d.device);
  if (k.empty()) return ", or raise --memory-budget " + d.device + " by " + human_bytes(over);
  if (k == "total") return ", or train on a device with " + human_bytes(over) + " more memory";
  return ", or free " + human_bytes(over) + " of " + d.device + "'s memory held by other programs";
}

}  // namespace

std::string remedies(const DeviceEstimate& d, uint64_t over, const FitContext& c) {
  const model::ModelSpec& spec = *c.spec;
  const uint64_t activations = d.memory.activations;
  std::string out = ". To fit";
  std::string sep = ": ";
  const uint64_t state = d.memory.parameters + d.memory.gradients + d.memory.optimizer_state;
  if (state > 0 && c.streamed_total) {
    const uint64_t limit = d.memory.total - over;
    out +=
        sep +
        (*c.streamed_total <= limit
             ? "keep parameters, gradients and optimizer state in host memory and stream them through " +
                   d.device + " with --stream-params (it then needs " + human_bytes(*c.streamed_total) + ")"
             : "streaming the parameters, gradients and optimizer state from host memory would not do (it "
               "still needs " +
                   human_bytes(*c.streamed_total) + ": a layer's update holds all of that layer's at once)");
    sep = "; ";
  }
  // Activations scale with the micro-batch: the smallest split that frees enough.
  int64_t parts = 0;
  for (int64_t k = 2; k <= c.micro_batch_samples && c.micro_batch_samples % k == 0; k *= 2) {
    parts = k;
    if (static_cast<double>(activations) * (1.0 - 1.0 / static_cast<double>(k)) >= static_cast<double>(over))
      break;
  }
  if (activations > 0 && parts > 0) {
    const uint64_t saved = activations - activations / static_cast<uint64_t>(parts);
    out += sep + "split each batch with [features.grad_accum] micro_batch = " +
           std::to_string(c.micro_batch_samples / parts) + " (activations about " +
           human_bytes(activations / static_cast<uint64_t>(parts)) + ", saving about " + human_bytes(saved) +
           (saved >= over ? ")" : ", not enough alone)");
    sep = "; ";
  }
  if (activations > 0 && spec.features.count("checkpointing") == 0) {
    out += sep +
           "recompute activations with [features.checkpointing] segments = \"auto\" (saves up to about " +
           human_bytes(activations / 2) + ")";
    sep = "; ";
  }
  if (d.memory.optimizer_state > 0 && spec.train.optimizer_device.empty() && !c.offload_device.empty() &&
      c.offload_device != d.device) {
    out += sep + "move the optimizer to the CPU with [train] optimizer_device = \"cpu\" (frees " +
           human_bytes(d.memory.optimizer_state) + " of optimizer state and the parameters' master copy of " +
           human_bytes(d.memory.parameters) + ")";
    sep = "; ";
  }
  if (!c.several_devices)
    out += sep + "let Tandem move layers to another device (--device " + d.device +
           ",cpu, or `device = \"...\"` on a layer)";
  return out + larger_limit(d, over, c);
}

std::string does_not_fit(const PlanEstimate& e, const FitContext& c) {
  std::string text = c.spec->path + " does not fit";
  std::string sep = ": ";
  const DeviceEstimate* worst = nullptr;
  for (const DeviceEstimate& d : e.devices) {
    if (d.over() == 0) continue;
    const exec::MemoryEstimate& m = d.memory;
    text += sep + d.device + " needs " + human_bytes(m.total) + " (parameters " + human_bytes(m.parameters) +
            ", gradients " + human_bytes(m.gradients) + ", optimizer state " +
            human_bytes(m.optimizer_state) + ", activations " + human_bytes(m.activations) + ", workspace " +
            human_bytes(m.workspace) + ", other " +
            human_bytes(m.other_state + m.inputs + m.allocator_rounding) + ") but " +
            limit_text(c, d.device, d.budget) + ": over by " + human_bytes(d.over());
    sep = "; ";
    if (worst == nullptr || d.over() > worst->over()) worst = &d;
  }
  if (c.several_devices)
    text += " (the placement closest to fitting, after trying every layer on every device)";
  if (worst != nullptr) text += remedies(*worst, worst->over(), c);
  return text;
}

}  // namespace tandem::host::place
