#!/usr/bin/env bash
# INT8 post-training quantization against f32 — what INT8 costs in accuracy
# and gains in speed: a model trained in f32 on onednn, quantized with each
# calibrator (`tandem quantize`, 512 calibration samples), then test accuracy
# and eval throughput of f32 and of each INT8 model (`tandem eval`, onednn,
# u8×s8 VNNI kernels).
#
#   bench/quantize.sh [--threads N] [--model examples/fmnist_mlp.toml] [--epochs N]
#                     [--batch N] [--repeat N] [--per-channel] [--weights RUN_DIR] [--build DIR]
#
# Throughput is `tandem eval --repeat N`: the best of N passes over the test
# set, timing the graph runs only (inputs written, graph run, logits read;
# data loading excluded), at the model's batch size or --batch. Every
# throughput is measured twice, one full round after the other, because the
# machine may be shared: compare within a round. uptime is printed before
# and after. --weights reuses a trained run directory (no training).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=2
model="examples/fmnist_mlp.toml"
epochs=""
batch=""
repeat=20
per_channel=""
weights=""
build="$repo/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --per-channel) per_channel="--per-channel"; shift ;;
    --weights) weights=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "quantize.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
tandem="$build/bin/tandem"
[ -x "$tandem" ] || { echo "quantize.sh: no $tandem; build the tandem and tandem-plugin-onednn targets" >&2; exit 2; }
out=${TANDEM_BENCH_OUT:-$repo/bench/results/quantize}
mkdir -p "$out"
stamp=$(date +%Y%m%d-%H%M%S)
name=$(basename "$model" .toml)
echo "uptime before: $(uptime)" >&2
device=(--device onednn:0 --threads "$threads")

if [ -z "$weights" ]; then
  weights="$out/$stamp-$name-f32"
  extra=()
  [ -n "$epochs" ] && extra+=(--set "train.epochs=$epochs")
  "$tandem" train "$repo/$model" "${device[@]}" --run-dir "$weights" "${extra[@]}" > "$weights.log" 2>&1 ||
    { echo "quantize.sh: training failed, see $weights.log" >&2; tail -5 "$weights.log" >&2; exit 1; }
  echo "trained: $(grep '^trained' "$weights.log")" >&2
fi

calibrators="minmax percentile entropy"
for c in $calibrators; do
  dir="$out/$stamp-$name-int8-$c"
  "$tandem" quantize "$repo/$model" --weights "$weights" --calib 512 --calibrator "$c" $per_channel \
    --output "$dir" "${device[@]}" > "$dir.log" 2>&1 ||
    { echo "quantize.sh: quantize $c failed, see $dir.log" >&2; tail -5 "$dir.log" >&2; exit 1; }
done

evaluate() {  # evaluate WEIGHTS -> "accuracy samples/s"
  local set=()
  [ -n "$batch" ] && set+=(--set "train.batch_size=$batch")
  local log
  log=$("$tandem" eval "$repo/$model" --weights "$1" "${device[@]}" --repeat "$repeat" "${set[@]}" 2>&1) ||
    { echo "quantize.sh: eval of $1 failed: $log" >&2; exit 1; }
  echo "$(echo "$log" | grep -o 'accuracy [0-9.]*' | cut -d' ' -f2) $(echo "$log" | grep -o 'throughput [0-9]*' | cut -d' ' -f2)"
}

printf '%-12s %-22s %9s %16s %16s\n' model precision test_acc "samples/s (1)" "samples/s (2)"
declare -A acc sps1 sps2
for round in 1 2; do
  for variant in f32 $calibrators; do
    w="$weights"
    [ "$variant" != f32 ] && w="$out/$stamp-$name-int8-$variant"
    read -r a s < <(evaluate "$w")
    acc[$variant]=$a
    if [ $round = 1 ]; then sps1[$variant]=$s; else sps2[$variant]=$s; fi
  done
done
for variant in f32 $calibrators; do
  label="f32"
  [ "$variant" != f32 ] && label="int8 $variant${per_channel:+ per-ch}"
  printf '%-12s %-22s %9s %16s %16s\n' "$name" "$label" "${acc[$variant]}" "${sps1[$variant]}" "${sps2[$variant]}"
done
echo "batch ${batch:-of the model file}, $threads threads, best of $repeat passes; weights $weights" >&2
echo "uptime after: $(uptime)" >&2
