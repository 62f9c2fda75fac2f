#!/usr/bin/env bash
# hub.transformers — models Tandem imports compute what transformers computes.
#
#   hf_import.sh TANDEM SOURCE_DIR WORK_DIR
#
# transformers makes a tiny randomly initialised model of each family (GPT-2,
# Llama 3.1 with grouped key/value heads and its rope scaling, Llama with
# biases in shards, Mistral, Qwen2 with a tied head; hf_models.py) and saves it with save_pretrained;
# `tandem import` makes its model file; `tandem eval --outputs` runs it on
# the reference and onednn backends, reading the weights from the directory;
# its logits must be within 1e-5 (relative to the largest) of transformers'
# on the same windows, and its greedy continuation of a prompt the same 32
# ids as transformers' generate (one import per family, at context 48: the
# prompt and all 32 in one window). Then fine-tuning runs start from a
# directory (--init-from; GPT-2 at 48 of its 64 positions), `tandem export --format hf`
# writes what they trained, and transformers loads it and computes Tandem's
# logits; --resume from a directory is refused.
#
# LoRA ([features.lora] on the Llama's q and v): after two plain SGD steps
# on one window, the adapters' gradients (step 1 - step 2) / lr agree with
# PEFT's on the same base, adapters and window within 1e-5 (hf_lora.py);
# exported for PEFT (--format peft) its adapters load with PeftModel, and
# merged (--format hf) into a plain model, both computing Tandem's logits;
# and on a bf16 and an INT8 base (base = "bf16", "int8"), merged into its
# widened weights.
#
# transformers and peft come from PyPI into a venv over Debian's
# python3-torch (hf_venv.sh); exit 77 (ctest: skipped) with the reason when
# they cannot be had.
set -euo pipefail

tandem=${1:?tandem executable}
source=${2:?source dir}
work=${3:?work dir}
mkdir -p "$work"
source "$source/tests/hub/hf_venv.sh"
hf_venv "$work"
run=$(mktemp -d "$work/run.XXXXXX")
trap 'rm -rf "$run"' EXIT
cd "$run"
fail() { echo "hub.transformers: $*" >&2; exit 1; }
models() { "$venv/bin/python" "$source/tests/hub/hf_models.py" "$@"; }

echo "== transformers makes a tiny model of each family"
: >compare.list  # MODEL_DIR OUTPUTS [ADAPTER]: compared with transformers at the end
models make . >make.log 2>&1 || { cat make.log >&2; fail "making the models"; }
for family in gpt2 llama llama_bias mistral qwen2; do
  "$tandem" import "$family" --context 48 --output "$family.toml" || fail "import of $family"
  for device in reference onednn; do
    "$tandem" eval "$family.toml" --weights "$family" --set data.train_tokens=tokens.bin --split validation \
      --device "$device" --threads 1 --outputs "$family.$device.safetensors" >"$family.$device.log" 2>&1 ||
      { cat "$family.$device.log" >&2; fail "tandem eval of $family on $device"; }
    echo "$family $family.$device.safetensors" >>compare.list
  done
done

echo "== greedy generation of 32 tokens as transformers' (context 48: the prompt and all 32 in one window)"
models generate 5,17,42,8 gpt2 llama llama_bias mistral qwen2 --tokens 32 >expected.ids 2>/dev/null ||
  fail "transformers' generate"
for family in gpt2 llama llama_bias mistral qwen2; do
  expect=$(grep "^$family " expected.ids | cut -d' ' -f2)
  for device in reference onednn; do
    got=$("$tandem" generate "$family.toml" --weights "$family" --prompt-ids 5,17,42,8 --tokens 32 \
      --temperature 0 --print-ids --device "$device" --threads 1 2>/dev/null) || fail "tandem generate of $family"
    [[ $got == "$expect" ]] || fail "$family on $device generated $got, transformers $expect"
  done
  echo "$family: the same 32 ids as transformers on reference and onednn"
done

echo "== fine-tuned from the directory, exported back, loaded by transformers"
# GPT-2 at 48 of its 64 positions (the export completes the table from
# the original), the sharded Llama with biases and a tied head.
for family in gpt2 llama_bias; do
  "$tandem" train "$family.toml" --init-from "$family" --set data.train_tokens=tokens.bin --set train.steps=3 \
    --set train.lr=0.01 --run-dir "$family-tuned-run" --threads 1 >"$family.train.log" 2>&1 ||
    { cat "$family.train.log" >&2; fail "training from $family/"; }
  "$tandem" export "$family.toml" --weights "$family-tuned-run" --format hf --output "$family-tuned" ||
    fail "export of $family"
  "$tandem" eval "$family.toml" --weights "$family-tuned-run" --set data.train_tokens=tokens.bin \
    --split validation --device reference --threads 1 --outputs "$family.tuned.safetensors" >/dev/null 2>&1 ||
    fail "tandem eval of the fine-tuned $family"
  echo "$family-tuned $family.tuned.safetensors" >>compare.list  # the export, in transformers
done
echo "== LoRA's adapter gradients against PEFT's"
cp llama.toml lora.toml
printf '\n[features.lora]\nrank = 4\nalpha = 8.0\ntargets = ["layers.*.self_attn.q", "layers.*.self_attn.v"]\n' >>lora.toml
"$venv/bin/python" -c "import numpy; numpy.random.default_rng(5).integers(0, 96, 49, numpy.uint16).tofile('one.bin')"
"$tandem" train lora.toml --init-from llama --device reference --threads 1 --set data.train_tokens=one.bin \
  --set data.validation_split=0 --set data.windows_per_epoch=1 --set train.batch_size=1 --set train.steps=2 \
  --set train.optimizer=sgd --set train.lr=0.5 --set train.weight_decay=0 --set train.schedule=constant \
  --set train.warmup_steps=0 --set train.clip_grad_norm=0 --checkpoint-every 1 --run-dir lora-run \
  >lora.train.log 2>&1 || { cat lora.train.log >&2; fail "LoRA training"; }
"$venv/bin/python" "$source/tests/hub/hf_lora.py" grads llama lora-run one.bin --context 48 --lr 0.5 --rank 4 \
  --alpha 8 layers.0.self_attn.q layers.0.self_attn.v 2>/dev/null || fail "LoRA gradients differ from PEFT's"
echo "== LoRA out: the adapters alone for PEFT, and merged into the model"
"$tandem" eval lora.toml --weights lora-run --set data.train_tokens=tokens.bin --split validation \
  --device reference --threads 1 --outputs lora.safetensors >/dev/null 2>&1 || fail "tandem eval of the LoRA run"
"$tandem" export lora.toml --weights lora-run --format peft --output lora-adapter || fail "export --format peft"
echo "llama lora.safetensors lora-adapter" >>compare.list  # PEFT's model with the exported adapter
"$tandem" export lora.toml --weights lora-run --format hf --output lora-merged || fail "export of the merged model"
echo "lora-merged lora.safetensors" >>compare.list

echo "== a bf16 directory: widened as it loads, or kept as the base of LoRA"
"$tandem" import llama_bf16 --context 48 --output llama_bf16.toml >/dev/null || fail "import of llama_bf16"
"$tandem" eval llama_bf16.toml --weights llama_bf16 --set data.train_tokens=tokens.bin --split validation \
  --device onednn --threads 1 --outputs llama_bf16.safetensors >/dev/null 2>&1 || fail "tandem eval of llama_bf16"
echo "llama_bf16 llama_bf16.safetensors" >>compare.list  # transformers in f32 from the same bf16 weights
printf '\n[features.lora]\nrank = 4\nbase = "bf16"\ntargets = ["layers.*.self_attn.q"]\n' >>llama_bf16.toml
"$tandem" train llama_bf16.toml --init-from llama_bf16 --device onednn --threads 1 --set data.train_tokens=tokens.bin \
  --set train.steps=2 --run-dir bf16-kept >bf16-kept.log 2>&1 || { cat bf16-kept.log >&2; fail "LoRA on llama_bf16"; }
"$venv/bin/python" - llama_bf16/model.safetensors bf16-kept/checkpoints/step-000000002.safetensors <<'PY' ||
import sys
from safetensors import safe_open
hf, run = (safe_open(f, "pt") for f in sys.argv[1:])
for name in hf.keys():
    if "self_attn.q_proj" in name:
        ours = name.replace("model.", "").replace("q_proj", "q")
        assert run.get_tensor(ours).equal(hf.get_tensor(name)), name
print("the bf16 base is the directory's, bit for bit")
PY
  fail "the bf16 base differs from the directory's tensors"

echo "== LoRA on a bf16 and an INT8 base: merged into its widened weights, transformers computes Tandem's logits"
for base in bf16 int8; do
  cp llama.toml "$base.toml"
  printf '\n[features.lora]\nrank = 4\nalpha = 8.0\nbase = "%s"\ntargets = ["layers.*.self_attn.q", "layers.*.self_attn.v"]\n' \
    "$base" >>"$base.toml"
  "$tandem" train "$base.toml" --init-from llama --device onednn --threads 1 --set data.train_tokens=tokens.bin \
    --set train.steps=3 --set train.lr=0.01 --run-dir "$base-run" >"$base.train.log" 2>&1 ||
    { cat "$base.train.log" >&2; fail "LoRA training on a $base base"; }
  "$tandem" eval "$base.toml" --weights "$base-run" --set data.train_tokens=tokens.bin --split validation \
    --device reference --threads 1 --outputs "$base.safetensors" >/dev/null 2>&1 || fail "tandem eval of the $base run"
  "$tandem" export "$base.toml" --weights "$base-run" --format hf --output "$base-merged" ||
    fail "export of the $base run"
  echo "$base-merged $base.safetensors" >>compare.list
done

if "$tandem" train gpt2.toml --resume gpt2 --set data.train_tokens=tokens.bin --run-dir again \
  >resume.log 2>&1; then
  fail "--resume from a model directory was accepted"
fi
grep -q -- "--init-from" resume.log || { cat resume.log >&2; fail "--resume's refusal does not say what to do"; }
echo "== every model's logits against transformers' (one process: torch starts once)"
models compare-list compare.list --tolerance 1e-5 2>/dev/null || fail "logits differ from transformers' (FAILED above)"
echo "hub.transformers: OK"
