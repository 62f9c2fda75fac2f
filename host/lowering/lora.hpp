// Low-rank adapters ([features.lora], model::LoraSpec): a target projection
// y = x·Wᵀ + b becomes y + (alpha/rank)·(dropout(x)·Aᵀ)·Bᵀ with the
// parameters "<target>.lora_A" [rank, in] (uniform in ±1/√in, as PEFT and
// torch.nn.Linear initialise) and "<target>.lora_B" [out, rank] (zeros: the
// adapted model starts as the base). With LoRA on, only these train: every
// other parameter is frozen, so the optimizer holds state for the adapters
// alone.
#pragma once

#include <string>

#include "lowering/model_graph_layers.hpp"

namespace tandem::host::lowering::detail {

// Whether `target` (a linear layer's name, or "<attention layer>.q" etc.)
// gets an adapter; records the patterns that matched.
bool lora_target(Context& ctx, const std::string& target);

// y_rows [N, out] of x_rows [N, in] through the target's projection, plus
// its adapter's term; `suffix` is the parameters' prefix within the layer
// ("" for a linear layer, "q." for an attention layer's q projection);
// `output_name` names the sum (the layer's output), "" leaves it unnamed.
Result<ValueId> add_lora(Context& ctx, ValueId x_rows, ValueId y_rows, const std::string& suffix,
                         const std::string& output_name = "");

// After the whole model: a target pattern that matched nothing is an error
// (a typo would otherwise train nothing but the frozen base's absence).
Result<void> check_lora_targets(const ModelGraph& out, const model::ModelSpec& spec);

}  // namespace tandem::host::lowering::detail
