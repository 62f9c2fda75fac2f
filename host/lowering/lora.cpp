#include "lowering/lora.hpp"

#include <fnmatch.h>

namespace tandem::host::lowering::detail {

bool lora_target(Context& ctx, const std::string& target) {
  if (!ctx.spec.lora.enabled) return false;
  bool any = false;
  for (const std::string& pattern : ctx.spec.lora.targets)
    if (fnmatch(pattern.c_str(), target.c_str(), 0) == 0) {
      ctx.out.lora_matched.insert(pattern);
      any = true;
    }
  return any;
}

Result<ValueId> add_lora(Context& ctx, ValueId x, ValueId y, const std::string& suffix,
                         const std::string& output_name) {
  const model::LoraSpec& lora = ctx.spec.lora;
  const std::string base = ctx.layer->name + "." + suffix;
  if (ctx.int8 != nullptr || ctx.out.tensor_parallel.size > 1)
    return ctx.error("LoRA adapters on an INT8 or tensor-parallel projection are not built: take '" +
                     base.substr(0, base.size() - 1) + "' out of [features.lora] targets");
  const int64_t rows = ctx.dims(x)[0], in = ctx.dims(x)[1], out = ctx.dims(y)[1], r = lora.rank;
  // PEFT's (and torch.nn.Linear's) kaiming_uniform with a = √5 draws from
  // ±1/√in; Initializer's kaiming_uniform bound is √(6/fan_in).
  // Context::parameter freezes every parameter under LoRA; the adapters train
  // (the stored parameter, which with ZeRO stage 3 is not the gathered value it returns).
  auto a = ctx.parameter(suffix + "lora_A", {r, in}, Initializer{"kaiming_uniform", 6 * in, r});
  if (!a) return a;
  ctx.out.frozen.erase(ctx.out.parameters.back());
  ctx.out.lora_adapters.insert(ctx.out.parameters.back());
  auto b = ctx.parameter(suffix + "lora_B", {out, r}, Initializer{"zeros"});
  if (!b) return b;
  ctx.out.frozen.erase(ctx.out.parameters.back());
  ctx.out.lora_adapters.insert(ctx.out.parameters.back());
  ValueId dropped = x;
  if (ctx.out.mode == Mode::Train && lora.dropout > 0) {
    const int64_t seed = ctx.dropout_seed();
    if (auto step = ctx.dropout_step(); !step) return step;
    auto d =
        ctx.emit("dropout", base + "lora_dropout", {x, ctx.out.dropout_step},
                 {{"p", lora.dropout}, {"seed", seed}}, {ctx.value(x).type, TensorType{TDM_U8, ctx.dims(x)}});
    if (!d) return d.error();
    ctx.out.dropout_nodes.push_back(ctx.value((*d)[0]).producer);
    dropped = (*d)[0];
  }
  auto down = ctx.emit("linear", base + "lora_down", {dropped, *a}, {}, {ctx.tensor({rows, r})});
  if (!down) return down.error();
  auto up = ctx.emit("linear", base + "lora_up", {(*down)[0], *b}, {}, {ctx.tensor({rows, out})});
  if (!up) return up.error();
  auto scaled = ctx.emit("scale", base + "lora_scale", {(*up)[0]}, {{"alpha", lora.alpha / double(r)}},
                         {ctx.tensor({rows, out})});
  if (!scaled) return scaled.error();
  auto sum =
      ctx.emit("add", output_name.empty() ? base + "lora_sum" : output_name, {y, (*scaled)[0]}, {},
               {ctx.tensor({rows, out})},
               output_name.empty() ? std::vector<std::string>{} : std::vector<std::string>{output_name});
  if (!sum) return sum.error();
  return (*sum)[0];
}

Result<void> check_lora_targets(const ModelGraph& out, const model::ModelSpec& spec) {
  for (const std::string& pattern : spec.lora.targets)
    if (out.lora_matched.count(pattern) == 0)
      return make_error(
          spec.path + ": [features.lora] targets: \"" + pattern +
              "\" matches no linear layer and no attention projection (<attention layer>.q, .k, .v "
              "or .out); `tandem plan` lists the layers",
          TDM_INVALID_ARGUMENT);
  return {};
}

}  // namespace tandem::host::lowering::detail
