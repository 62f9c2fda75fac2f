#!/usr/bin/env bash
# ZeRO against plain data parallelism, in one invocation: the GPT example
# (examples/gpt_fortunes.toml, AdamW with clipping) trained for --steps
# steps on --ranks ranks (mpirun, oversubscribed where the machine has fewer
# cores) at the same global batch, with [train] zero = 0, 1, 2 and 3, and 2
# and 3 again with their exchanges in place (rows "2 in place", "3 in place":
# zero_overlap = false), each once per round, interleaved, --rounds rounds.
# For each:
# the step time (the median over rounds of a run's mean step after the
# first, from metrics.jsonl) and its ratio to plain data parallelism's (in
# brackets the lowest and highest ratio of a single round), the largest
# difference of any step's loss from plain data parallelism's, and what
# `tandem plan` puts on each rank (parameters, gradients, optimizer state,
# and the activations, where the exchanges in flight and the gathered
# parameters are), and the peak rank 0's device allocator measured over the
# training steps (all of it: the model's state, activations, workspace and
# buffers). With --offload DEVICE, stages 0 to 3 again with [train]
# optimizer_device = DEVICE (rows "N offload": ZeRO-Offload, each rank's
# updates and its shard's optimizer state on DEVICE); their plan columns read
# "the rank's device + DEVICE".
#
#   bench/zero.sh [--ranks 2] [--steps 50] [--batch 32] [--rounds 3] [--threads 1] [--device onednn]
#                 [--offload DEVICE] [--build DIR]
#
# Results go to bench/results/zero/ (the runs' metrics). Measure on a quiet
# machine: uptime is printed.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ranks=2
steps=50
batch=32
rounds=3
threads=1
device=onednn
offload=
build="$repo/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --offload) offload=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "zero.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
tandem="$build/bin/tandem"
[ -x "$tandem" ] || { echo "zero.sh: no $tandem; build the tandem, tandem-plugin-mpi and tandem-plugin-$device targets" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "zero.sh: mpirun not found (install openmpi-bin)" >&2; exit 2; }
[ $((batch % ranks)) -eq 0 ] || { echo "zero.sh: --batch $batch does not split over $ranks ranks" >&2; exit 2; }
model="$repo/examples/gpt_fortunes.toml"
out=${TANDEM_BENCH_OUT:-$repo/bench/results/zero}/$(date +%Y%m%d-%H%M%S)-np$ranks
mkdir -p "$out"
echo "uptime before: $(uptime)" >&2
sets=(--set "train.steps=$steps" --set "train.batch_size=$((batch / ranks))" --set train.log_every=1
      --set train.warmup_steps=5)
launch=(mpirun -np "$ranks" --oversubscribe --allow-run-as-root)
configs=(0 1 2 3 2i 3i)  # "i": the exchanges in place
[ -z "$offload" ] || configs+=(0o 1o 2o 3o)  # "o": the optimizer on $offload
options() {  # the stage, overlap and offload options of configuration $1
  local stage=${1%[io]}
  echo "--zero $stage"
  [ "$1" != "${stage}i" ] || echo "--set train.zero_overlap=false"
  [ "$1" != "${stage}o" ] || echo "--set train.optimizer_device=$offload"
}
for round in $(seq 1 "$rounds"); do
  for config in "${configs[@]}"; do
    echo "zero.sh: round $round, zero $config on $ranks ranks" >&2
    run="$out/round$round-zero$config"
    # shellcheck disable=SC2046 # options are words
    "${launch[@]}" "$tandem" train "$model" --device "$device" --threads "$threads" "${sets[@]}" $(options "$config") \
      --run-dir "$run" > "$run.log" 2>&1 || { tail -20 "$run.log" >&2; exit 1; }
  done
done
for config in "${configs[@]}"; do
  # shellcheck disable=SC2046
  "$tandem" plan "$model" --device "$device" --threads "$threads" "${sets[@]}" --ranks "$ranks" $(options "$config") \
    > "$out/plan$config.txt" 2>&1 || { cat "$out/plan$config.txt" >&2; exit 1; }
done
echo "uptime after: $(uptime)" >&2
python3 - "$out" "$ranks" "$steps" "$batch" "$rounds" "${configs[@]}" <<'EOF'
import json, re, statistics, sys
out, ranks, steps, batch, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
stages = tuple(sys.argv[6:])
label = {s: s.replace("i", " in place").replace("o", " offload") for s in stages}

def steps_of(round_, stage):
    rows = [json.loads(l) for l in open(f"{out}/round{round_}-zero{stage}/metrics.jsonl")]
    return {r["step"]: r for r in rows if r.get("event") == "step"}

def measured_peak(stage):  # rank 0's allocators over the training steps (metrics.jsonl), per device
    peaks = {}
    for l in open(f"{out}/round1-zero{stage}/metrics.jsonl"):
        if '"event":"memory"' in l:
            r = json.loads(l)
            peaks[r["device"]] = max(peaks.get(r["device"], 0), r["training_peak_bytes"])
    return " + ".join(f"{p / 2**20:.1f} MiB" for p in peaks.values()) or "?"

def step_ms(rows):  # the steps after the first (its time includes the warm-up)
    times = [batch / r["samples_per_second"] * 1e3 for s, r in sorted(rows.items()) if s > 1]
    return sum(times) / len(times)

def planned(stage, row):  # each device's column: "the rank's device + the optimizer's"
    text = open(f"{out}/plan{stage}.txt").read()
    m = re.search(r"\n  " + row + r"((?: +[0-9.]+ [KMG]?i?B)+)", text)
    return " + ".join(re.findall(r"[0-9.]+ [KMG]?i?B", m.group(1))) if m else "?"

runs = {(r, s): steps_of(r, s) for r in range(1, rounds + 1) for s in stages}
ms = {k: step_ms(v) for k, v in runs.items()}
base = statistics.median(ms[(r, "0")] for r in range(1, rounds + 1))
print(f"GPT example, {ranks} ranks, global batch {batch}, {steps} steps, {rounds} rounds")
w = 21 if any(s.endswith("o") for s in stages) else 10  # "7.1 MiB + 3.5 MiB"
print(f"{'stage':>10} {'step ms':>9} {'vs DP':>6} {'(rounds)':>13} {'max |loss - DP|':>16} {'params':>{w}} "
      f"{'grads':>{w}} {'opt state':>{w}} {'activations':>{w}} {'peak':>{w}}")
for s in stages:
    median = statistics.median(ms[(r, s)] for r in range(1, rounds + 1))
    ratios = [ms[(r, s)] / ms[(r, "0")] for r in range(1, rounds + 1)]
    diff = max(abs(runs[(r, s)][k]["loss"] - runs[(r, "0")][k]["loss"])
               for r in range(1, rounds + 1) for k in runs[(r, "0")])
    print(f"{label[s]:>10} {median:9.1f} {median / base:6.3f} [{min(ratios):.3f}-{max(ratios):.3f}] {diff:16.3g} "
          f"{planned(s, 'parameters'):>{w}} {planned(s, 'gradients'):>{w}} {planned(s, 'optimizer state'):>{w}} "
          f"{planned(s, 'activations'):>{w}} {measured_peak(s):>{w}}")
EOF
