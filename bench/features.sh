#!/usr/bin/env bash
# Feature plugins against plain training on the same run — what each
# feature costs and saves, on onednn: test accuracy, training throughput and
# the activation memory the executor plans, for
#   - amp (bf16) vs f32 on the model files given by --models;
#   - checkpointing (sqrt(n) segments) and grad_accum (micro_batch = 64 at
#     batch 256) vs plain on bench/models/mlp16.toml (16 layers of 512).
#
#   bench/features.sh [--threads N] [--models "examples/fmnist_mlp.toml examples/fmnist_cnn.toml"]
#                     [--epochs N] [--build DIR]
#
# Every run is a full `tandem train` (its own run directory under
# $TANDEM_BENCH_OUT, default bench/results/features), one after another,
# same threads, same seed. Throughput is the trainer's samples/s of the last
# epoch (data loading included, evaluation excluded). Measure on a quiet
# machine (see bench/README.md): uptime is printed before and after.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=2
models="examples/fmnist_mlp.toml"
epochs=""
build="$repo/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "features.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
tandem="$build/bin/tandem"
[ -x "$tandem" ] || { echo "features.sh: no $tandem; build the tandem, tandem-plugin-onednn and tandem-plugin-amp targets" >&2; exit 2; }
out=${TANDEM_BENCH_OUT:-$repo/bench/results/features}
mkdir -p "$out"
stamp=$(date +%Y%m%d-%H%M%S)
echo "uptime before: $(uptime)" >&2

run() {  # run NAME MODEL [extra args...]
  local name=$1 model=$2
  shift 2
  local dir="$out/$stamp-$(basename "$model" .toml)-$name"
  local extra=()
  [ -n "$epochs" ] && extra+=(--set "train.epochs=$epochs")
  "$tandem" train "$model" --device onednn:0 --threads "$threads" --memory-report --run-dir "$dir" "${extra[@]}" "$@" \
    > "$dir.log" 2>&1 || { echo "features.sh: $name failed, see $dir.log" >&2; tail -5 "$dir.log" >&2; exit 1; }
  local acc sps act
  acc=$(sed -n 's/^test accuracy //p' "$dir.log" | tail -1)
  sps=$(grep 'done in' "$dir.log" | tail -1 | grep -o '[0-9.]* samples/s' | cut -d' ' -f1)
  act=$(sed -n 's/^  activations *\([0-9.]* [KMG]*i*B\).*/\1/p' "$dir.log" | tail -1)
  printf '%-16s %-16s %10s %14s %14s\n' "$(basename "$model" .toml)" "$name" "$acc" "$sps" "$act"
}

printf '%-16s %-16s %10s %14s %14s\n' model features test_acc samples/s activations
for model in $models; do
  run f32 "$repo/$model"
  run amp-bf16 "$repo/$model" --feature amp:dtype=bf16
done
mlp16="$repo/bench/models/mlp16.toml"
run plain "$mlp16"
run checkpointing "$mlp16" --feature checkpointing:segments=auto
run grad_accum-64 "$mlp16" --feature grad_accum:micro_batch=64
echo "uptime after: $(uptime)" >&2
