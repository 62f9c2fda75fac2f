#!/usr/bin/env bash
# Streamed parameters on the CPU stand-in: onednn:0 limited to a third of
# what the model needs resident (TANDEM_DEVICE_MEMORY_LIMIT), the layers
# whose parameters, gradients and AdamW state the planner chose to stream
# from host memory (or every layer, --every), against
# the same model resident on an unlimited onednn:0, in one invocation:
# throughput ratio, last loss and a fingerprint of the final weights of each
# (the same steps from the same start: equal when streaming changes no
# number), planned against measured device
# peak, bytes streamed per step and the share of the copies' time hidden
# behind compute. Then `tandem plan` of the streamed run.
#
#   bench/streaming.sh [--model bench/models/gpt2_small_bytes.toml] [--steps N] [--threads N]
#                      [--fraction 3] [--depth 1] [--every] [--build DIR] [--set KEY=VALUE ...]
#                      [--device onednn:0] [--feature NAME:KEY=VALUE,...]
#
# The model default is GPT-2 small's shape on bytes (85 M parameters).
# --device cuda:0 runs it on a GPU, limited by --memory-budget rather than
# TANDEM_DEVICE_MEMORY_LIMIT (the onednn plugin's); --feature is passed to
# every run (amp:dtype=bf16 on a GPU).
# --set passes model-file overrides to both runs (for example
# features.checkpointing.segments="blocks" when the activations alone do not
# fit the limit). Results go to bench/results/streaming/ (JSON per run).
# Measure on a quiet machine: uptime is printed.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
model="bench/models/gpt2_small_bytes.toml"
steps=20
threads=2
fraction=3
depth=1
choice=()
build="$repo/build"
sets=()
device=onednn:0
features=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --fraction) fraction=$2; shift 2 ;;
    --depth) depth=$2; shift 2 ;;
    --every) choice=(--stream-params); shift ;;
    --build) build=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    --device) device=$2; shift 2 ;;
    --feature) features+=(--feature "$2"); shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "streaming.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
tandem="$build/bin/tandem"
[ -x "$tandem" ] || { echo "streaming.sh: no $tandem; build the tandem and tandem-plugin-onednn targets" >&2; exit 2; }
out=${TANDEM_BENCH_OUT:-$repo/bench/results/streaming}
mkdir -p "$out"
stamp=$(date +%Y%m%d-%H%M%S)
echo "uptime before: $(uptime)" >&2

# What the model needs resident on onednn:0, in KiB; the limit is a fraction of it.
need_kib=$("$tandem" plan "$repo/$model" --device "$device" --placement pinned --no-stream --threads "$threads" \
  "${features[@]}" "${sets[@]}" |
  sed -n 's/^  total *\([0-9.]*\) \([KMG]*i*B\).*/\1 \2/p' | head -1 |
  awk '{ printf "%.0f", $1 * ($2 == "MiB" ? 1024 : $2 == "GiB" ? 1048576 : $2 == "KiB" ? 1 : 1/1024) }')
limit="$((need_kib / fraction))KiB"
echo "resident plan: ${need_kib} KiB on $device; limit 1/${fraction}: ${limit}" >&2
# The limit: the onednn plugin's own capacity, else the host's budget.
limited=(env "TANDEM_DEVICE_MEMORY_LIMIT=$device=$limit")
budget=()
if [[ "$device" != onednn* ]]; then
  limited=()
  budget=(--memory-budget "$device=$limit")
fi

common=(--device "$device" --threads "$threads" --steps "$steps" --warmup 0 --repeats 1 "${features[@]}" "${sets[@]}")
resident="$out/$stamp-resident.json"
streamed="$out/$stamp-streamed.json"
"$tandem" bench "$repo/$model" "${common[@]}" --no-stream --json "$resident" >&2
"${limited[@]}" "$tandem" bench "$repo/$model" "${common[@]}" "${budget[@]}" "${choice[@]}" --stream-depth "$depth" \
  --json "$streamed" >&2
"${limited[@]}" "$tandem" plan "$repo/$model" --device "$device" --threads "$threads" "${budget[@]}" "${choice[@]}" \
  --stream-depth "$depth" "${features[@]}" "${sets[@]}" | tee "$out/$stamp-plan.txt"
echo "uptime after: $(uptime)" >&2

python3 - "$resident" "$streamed" "$limit" <<'EOF'
import json, sys
r, s = (json.load(open(p)) for p in sys.argv[1:3])
mib = lambda b: b / 2**20
print(f"\nresident (unlimited):   {r['median_samples_per_second']:8.2f} samples/s, last loss {r['last_loss']:.6f}, "
      f"device peak {mib(r['device_peak_bytes']):.0f} MiB (plan {mib(r['planned_bytes']):.0f})")
print(f"streamed (limit {sys.argv[3]}): {s['median_samples_per_second']:8.2f} samples/s, last loss {s['last_loss']:.6f}, "
      f"device peak {mib(s['device_peak_bytes']):.0f} MiB (plan {mib(s['planned_bytes']):.0f}, "
      f"{100 * (s['device_peak_bytes'] - s['planned_bytes']) / s['planned_bytes']:+.2f}%)")
print(f"streamed per step: {mib(s.get('streamed_bytes_per_step', 0)):.0f} MiB, "
      f"{100 * s.get('stream_hidden_fraction', 0):.0f}% of the copies' time hidden")
print(f"throughput streamed / resident: {s['median_samples_per_second'] / r['median_samples_per_second']:.3f}; "
      f"last losses {'equal' if s['last_loss'] == r['last_loss'] else 'DIFFER'}; final weights "
      f"{'bit-identical' if s['weights_fnv1a'] == r['weights_fnv1a'] else 'DIFFER'} (FNV-1a {s['weights_fnv1a']})")
EOF
