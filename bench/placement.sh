#!/usr/bin/env bash
# Heterogeneous placement on two devices, by default two CPU
# backends standing in for a GPU and a CPU (onednn:0 and reference:0): for
# each configuration, the step
# time `tandem plan` estimates from the measured cost model against the step
# time `tandem train` measures, the copies per step and how much of their
# time was hidden behind compute, and planned vs measured peak memory of the
# run's first device.
#
#   bench/placement.sh [--model examples/fmnist_mlp.toml] [--threads N] [--steps N] [--build DIR]
#                      [--devices FIRST,SECOND]
#
# Configurations: everything on FIRST; automatic placement with FIRST
# limited to half of what the model needs there; the optimizer offloaded to
# SECOND; the model's own pins (if any) with SECOND as the default. The
# devices are onednn:0,reference:0 unless --devices names others: on a GPU
# machine, --devices cuda:0,onednn:0 measures a GPU and a CPU.
# Measured step time = batch / the trainer's samples/s of its last epoch
# (data loading included, evaluation excluded). The cost cache lives in
# $TANDEM_CACHE_DIR (default bench/results/placement/cost-cache), so the
# first run calibrates. Measure on a quiet machine: uptime is printed.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
model="examples/fmnist_mlp.toml"
threads=2
steps=200
build="$repo/build"
devices="onednn:0,reference:0"
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --devices) devices=$2; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "placement.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
first=${devices%%,*}
second=${devices#*,}
[ -n "$first" ] && [ -n "$second" ] && [ "$first" != "$devices" ] ||
  { echo "placement.sh: --devices takes two devices, FIRST,SECOND (e.g. cuda:0,onednn:0)" >&2; exit 2; }
tandem="$build/bin/tandem"
[ -x "$tandem" ] || { echo "placement.sh: no $tandem; build the tandem, tandem-plugin-onednn and tandem-plugin-reference targets" >&2; exit 2; }
out=${TANDEM_BENCH_OUT:-$repo/bench/results/placement}
export TANDEM_CACHE_DIR=${TANDEM_CACHE_DIR:-$out/cost-cache}
mkdir -p "$out"
stamp=$(date +%Y%m%d-%H%M%S)
name=$(basename "$model" .toml)
echo "uptime before: $(uptime)" >&2

# What the whole model needs on the first device: half of it is the budget automatic placement must meet.
need=$("$tandem" plan "$repo/$model" --device "$first" --placement pinned --threads "$threads" |
  sed -n 's/^  total *\([0-9.]*\) \([KMG]*i*B\).*/\1 \2/p' | head -1)
half=$(echo "$need" | awk '{ printf "%.0fKiB", $1 * ($2 == "MiB" ? 1024 : $2 == "GiB" ? 1048576 : $2 == "KiB" ? 1 : 1/1024) / 2 }')

# A configuration that fails is reported and the others still run; the
# exit status is then 1.
failed=0
run() {  # run LABEL [options for plan and train...]
  local label=$1
  shift
  local dir="$out/$stamp-$name-$label"
  "$tandem" plan "$repo/$model" --threads "$threads" "$@" > "$dir.plan" 2>&1 ||
    { echo "placement.sh: plan $label failed, see $dir.plan" >&2; tail -3 "$dir.plan" >&2; failed=1; return; }
  "$tandem" train "$repo/$model" --threads "$threads" --memory-report --run-dir "$dir" \
    --set "train.steps=$steps" "$@" > "$dir.log" 2>&1 ||
    { echo "placement.sh: train $label failed, see $dir.log" >&2; tail -3 "$dir.log" >&2; failed=1; return; }
  local est batch sps measured copies hidden planned peak
  est=$(sed -n 's/^estimated step time: \([0-9.]*\) \([mu]*s\) .*/\1 \2/p' "$dir.plan" |
    awk '{ print ($2 == "s" ? $1 * 1000 : $2 == "us" ? $1 / 1000 : $1) }')
  batch=$(sed -n 's/^plan for .*: batch \([0-9]*\) per micro-batch x \([0-9]*\).*/\1 \2/p' "$dir.plan" | awk '{ print $1 * $2 }')
  sps=$(grep 'done in' "$dir.log" | tail -1 | grep -o '[0-9.]* samples/s' | cut -d' ' -f1)
  measured=$(awk -v b="$batch" -v s="$sps" 'BEGIN { printf "%.2f", b / s * 1000 }')
  copies=$(sed -n 's/^copies between devices per step: \([0-9]*\) planned.*/\1/p' "$dir.log")
  hidden=$(sed -n 's/^copy time per step: .*, \([0-9]*%\) hidden.*/\1/p' "$dir.log")
  planned=$(sed -n 's/^  total *\([0-9.]* [KMG]*i*B\).*/\1/p' "$dir.log" | head -1)
  peak=$(sed -n 's/^  measured peak *\([0-9.]* [KMG]*i*B\) (\(.*\)) during.*/\1 (\2)/p' "$dir.log" | head -1)
  printf '%-10s %-34s %9.2f %9s %6s %6s %6s  %-10s %s\n' "$name" "$label" "$est" "$measured" \
    "$(awk -v e="$est" -v m="$measured" 'BEGIN { printf "%.2f", m / e }')" "${copies:-0}" "${hidden:--}" \
    "$planned" "$peak"
}

printf '%-10s %-34s %9s %9s %6s %6s %6s  %-10s %s\n' model configuration est_ms meas_ms ratio copies hidden \
  planned "measured peak (first device)"
run "$first" --device "$first" --placement pinned
run "auto, $first budget $half" --device "$first,$second" --memory-budget "$first=$half"
run "optimizer on $second" --device "$first" --set "train.optimizer_device=\"$second\""
grep -q '^device *=' "$repo/$model" && run "pins, default $second" --device "$second" --placement pinned
echo "uptime after: $(uptime)" >&2
exit "$failed"
