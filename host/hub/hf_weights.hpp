// A Hugging Face model directory's weights under Tandem's names and layouts,
// read straight from its safetensors files (`model.safetensors`, or the
// shards a `model.safetensors.index.json` lists): `--init-from DIR` and
// `--weights DIR` take such a directory, no converted copy is written.
//
// The names are those of the model file `tandem import` writes
// (hf_model_file.hpp). Per family:
//   GPT-2    wte, wpe, h.<i>.{ln_1, attn, ln_2, c_fc, c_proj}, ln_f, lm_head.
//            Its Conv1D weights are stored [in, out]: transposed to a
//            linear's [out, in]; c_attn packs q, k and v by columns: split.
//   Llama, Mistral, Qwen2
//            embed_tokens, layers.<i>.{input_layernorm, self_attn,
//            post_attention_layernorm, gate_proj, up_proj, down_proj}, norm,
//            lm_head; the attention's {q,k,v,o}_proj become its q, k, v, out.
// Norm scales and shifts become gamma and beta. bf16 and f16 tensors stay
// as stored until each is written to its parameter, widened to an f32
// master weight (amp casts them per step) or kept by a bf16 LoRA base;
// GPT-2's transposed and split tensors, and f64 ones, become f32.
// A tensor that fits none of the names is refused, naming it and its file:
// it would belong to a layer the model file lacks.
#pragma once

#include <string>

#include "checkpoint/safetensors.hpp"
#include "util/result.hpp"

namespace tandem::host::hub {

// `keep` (by Hugging Face name, as stored) reads only some tensors.
Result<checkpoint::Checkpoint> read_hf_weights(const std::string& dir,
                                               const checkpoint::TensorFilter& keep = {});

// Checkpoint metadata naming a tensor of which the model may take only the
// first rows: GPT-2's learned positions, trained for n_positions and
// fine-tuned at a shorter context.
inline constexpr const char* kLeadingRowsKey = "tandem.leading_rows.";

}  // namespace tandem::host::hub
