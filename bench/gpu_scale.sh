#!/usr/bin/env bash
# Training at the scale people train, on one GPU: GPT-2 small
# (bench/models/gpu/gpt2_small.toml, 124 M parameters, batch 16 x 1024 tokens)
# and a 1.24 B Llama (bench/models/gpu/llama_1b.toml, batch 8 x 1024), bf16
# (Tandem's amp:dtype=bf16, PyTorch's autocast: f32 weights and AdamW
# state), against PyTorch eager and torch.compile on the same GPU, same
# batch, same step (zero_grad + forward + backward + AdamW).
#
#   bench/gpu_scale.sh [--build DIR] [--models "gpt2_small llama_1b"] [--quick] [--no-peer] [--profile]
#                      [--compare-attention] [--compare-wide] [--plugin-option NAME.KEY=VALUE]...
#
# First the GPU's bf16 matrix peak is measured (bench/gpu_scale.py peak: an
# 8192^3 bf16 product through PyTorch's cuBLAS, mean of 10 after warm-up,
# random data); model FLOPs per token are 6 x parameters + 12 x layers x
# context x attention width (forward and backward, PaLM's count; the causal
# half of the scores is counted too, as PaLM and nanoGPT count it), and MFU is
# model FLOP/s over that peak. --profile adds `tandem bench --profile` of
# each model (one synchronisation per node: time per op, not a throughput).
# --compare-attention also runs Tandem with the cuda plugin's f32-arithmetic
# attention (--plugin-option cuda.attention=f32_tiles: the row
# tandem-f32_tiles); --compare-wide also runs Tandem with amp's
# wide_products = false (the products amp keeps in f32 read f32 operands:
# the row tandem-f32_products); --plugin-option passes an option to every Tandem run
# (cuda.tf32=true puts the products amp keeps in f32 on TF32); --quick
# takes fewer steps (the Llama).
# Raw JSON per run goes to $TANDEM_BENCH_OUT (default bench/results/); the
# table (bench/gpu_scale.py table) is printed last. Exit status: 0 every run
# measured, 1 a run failed, 2 usage, 77 no usable GPU.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build"
models="gpt2_small llama_1b"
steps=10 warmup=3 repeats=3
peer=1
profile=0
compare=0
compare_wide=0
options=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --quick) steps=4 warmup=2 repeats=2; shift ;;
    --no-peer) peer=0; shift ;;
    --profile) profile=1; shift ;;
    --compare-attention) compare=1; shift ;;
    --compare-wide) compare_wide=1; shift ;;
    --plugin-option) options+=(--plugin-option "$2"); shift 2 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "gpu_scale.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
tandem="$build/bin/tandem"
[ -x "$tandem" ] || { echo "gpu_scale.sh: no $tandem; build first" >&2; exit 2; }
nvidia-smi > /dev/null 2>&1 || { echo "gpu_scale.sh: no usable GPU (nvidia-smi fails); nothing measured" >&2; exit 77; }
out=${TANDEM_BENCH_OUT:-$repo/bench/results}
mkdir -p "$out"
has_torch=0
python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null && has_torch=1

failed=0
if [ "$has_torch" = 1 ]; then
  python3 "$repo/bench/gpu_scale.py" peak --json "$out/peak.json" || failed=1
else
  echo "gpu_scale: SKIPPED the peak and the PyTorch peers: python3 has no PyTorch that sees a GPU"
fi
for model in $models; do
  file="$repo/bench/models/gpu/$model.toml"
  common=(--steps "$steps" --warmup "$warmup" --repeats "$repeats")
  echo "== tandem $model ${options[*]}"
  "$tandem" "${options[@]}" bench "$file" --device cuda:0 --feature amp:dtype=bf16 "${common[@]}" \
    --json "$out/$model-tandem.json" || failed=1
  if [ "$compare" = 1 ]; then
    echo "== tandem-f32_tiles $model"
    "$tandem" "${options[@]}" bench "$file" --device cuda:0 --feature amp:dtype=bf16 "${common[@]}" \
      --plugin-option cuda.attention=f32_tiles --json "$out/$model-tandem-f32_tiles.json" || failed=1
  fi
  if [ "$compare_wide" = 1 ]; then
    echo "== tandem-f32_products $model"
    "$tandem" "${options[@]}" bench "$file" --device cuda:0 --feature amp:dtype=bf16,wide_products=false \
      "${common[@]}" --json "$out/$model-tandem-f32_products.json" || failed=1
  fi
  if [ "$profile" = 1 ]; then
    "$tandem" "${options[@]}" bench "$file" --device cuda:0 --feature amp:dtype=bf16 --steps 3 --warmup 2 --repeats 1 \
      --profile-nodes 12 || failed=1
  fi
  if [ "$peer" = 1 ] && [ "$has_torch" = 1 ]; then
    for mode in eager compile; do
      echo "== pytorch-$mode $model"
      flag=()
      [ "$mode" = compile ] && flag=(--compile)
      PYTHONPATH="$repo/bench" python3 "$repo/bench/torch_peer.py" "$file" --device cuda --dtype bf16 \
        --threads "$(nproc)" "${common[@]}" "${flag[@]}" --label "pytorch-$mode" \
        --json "$out/$model-pytorch-$mode.json" || failed=1
    done
  fi
done
python3 "$repo/bench/gpu_scale.py" table --dir "$out" --models "$models" || failed=1
exit "$failed"
