#!/usr/bin/env bash
# Pipeline parallelism across ranks, in one invocation: the GPT example
# (examples/gpt_fortunes.toml) under `mpirun -np 2` with
# `[train] pipeline_parallel = 2` (its layers cut into two stages by
# measured cost, one rank each, one thread each) and --micro micro-batches
# per step, against
#   - the same stages with the pipeline off ([train] pipeline = false: the
#     micro-batches through the stages one after another, one rank busy at
#     a time),
#   - one process with both threads on the same micro-batches (gradient
#     accumulation), and on the whole batch,
#   - data parallelism on the same two ranks (batch 16 per rank: the same
#     32 samples a step), one thread each.
# Each configuration runs once per round, interleaved, --rounds rounds.
#
# For each: tokens per second over the steps after the first (the median
# over rounds; in brackets the lowest and highest ratio of a single round
# against the reference row), and for the pipelines the idle share of stage
# time measured on the ranks (--memory-report) beside the bubble
# (P-1)/(M+P-1) `tandem plan --ranks 2` prints.
#
#   bench/pipeline_parallel.sh [--steps 30] [--micro 8] [--rounds 3] [--build DIR]
#
# Results go to bench/results/pipeline_parallel/ (each run's log and metrics).
# Measure on a quiet machine: uptime is printed before and after.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=30
micro=8
rounds=3
build="$repo/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --micro) micro=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "pipeline_parallel.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
tandem="$build/bin/tandem"
[ -x "$tandem" ] || { echo "pipeline_parallel.sh: no $tandem; build the tandem, tandem-plugin-onednn, tandem-plugin-mpi and tandem-plugin-grad_accum targets" >&2; exit 2; }
mpirun=$(command -v mpirun || command -v mpiexec || true)
[ -n "$mpirun" ] || { echo "pipeline_parallel.sh: no mpirun (install openmpi-bin)" >&2; exit 2; }
out=${TANDEM_BENCH_OUT:-$repo/bench/results/pipeline_parallel}/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
echo "uptime before: $(uptime)" >&2
model="$repo/examples/gpt_fortunes.toml"
common=(--device onednn --set "train.steps=$steps" --set train.log_every=1 --set train.warmup_steps=5 --memory-report)
stages=(--threads 1 --set train.pipeline_parallel=2 --set "train.pipeline_microbatches=$micro")
ranks=("$mpirun" -np 2 --oversubscribe --allow-run-as-root --bind-to none)
declare -A config=(
  [pipeline-2-stages]="${stages[*]}"
  [stages-one-after-another]="${stages[*]} --set train.pipeline=false"
  [one-process-micro]="--threads 2 --set train.pipeline_microbatches=$micro"
  [one-process-whole]="--threads 2"
  [data-parallel-2]="--threads 1 --set train.batch_size=16"
)
declare -A launch=([pipeline-2-stages]=ranks [stages-one-after-another]=ranks [data-parallel-2]=ranks)
order=(pipeline-2-stages stages-one-after-another one-process-micro one-process-whole data-parallel-2)
for round in $(seq 1 "$rounds"); do
  for name in "${order[@]}"; do
    echo "pipeline_parallel.sh: round $round, $name" >&2
    run="$out/round$round-$name"
    prefix=()
    [ -n "${launch[$name]:-}" ] && prefix=("${ranks[@]}")
    # shellcheck disable=SC2086 # the configuration's words
    "${prefix[@]}" "$tandem" train "$model" ${config[$name]} "${common[@]}" --run-dir "$run" > "$run.log" 2>&1 ||
      { tail -20 "$run.log" >&2; exit 1; }
  done
done
# shellcheck disable=SC2086
"$tandem" plan "$model" --device onednn ${stages[*]} --ranks 2 > "$out/plan.txt" 2>&1 ||
  { cat "$out/plan.txt" >&2; exit 1; }
echo "uptime after: $(uptime)" >&2
python3 - "$out" "$rounds" "$micro" "${order[@]}" <<'EOF'
import json, re, statistics, sys
out, rounds, micro, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
context = 128
batch = {n: (16 if n == "data-parallel-2" else 32) for n in names}  # samples per rank and step
ranks = {n: (2 if n == "data-parallel-2" else 1) for n in names}     # ranks sharing the step's samples
reference = "stages-one-after-another"

def rate(round_, name):  # tokens/s between the end of step 1 and the last step of epoch 1
    rows = [json.loads(l) for l in open(f"{out}/round{round_}-{name}/metrics.jsonl")]
    steps = sorted((r for r in rows if r.get("event") == "step" and r["epoch"] == 1), key=lambda r: r["step"])
    seconds = lambda r: r["step"] * batch[name] / r["samples_per_second"]  # the epoch's rate so far
    first, last = steps[0], steps[-1]
    tokens = (last["step"] - first["step"]) * batch[name] * ranks[name] * context
    return tokens / (seconds(last) - seconds(first))

def idle(round_, name):
    m = re.search(r"idle ([0-9.]+)% of stage time", open(f"{out}/round{round_}-{name}.log").read())
    return float(m.group(1)) if m else None

m = re.search(r"bubble \(S-1\)/\(M\+S-1\) = ([0-9.]+) %", open(f"{out}/plan.txt").read())
bubble = float(m.group(1)) if m else None
runs = {(r, n): rate(r, n) for r in range(1, rounds + 1) for n in names}
print(f"pipeline_parallel.sh: gpt_fortunes, {micro} micro-batches per step, {rounds} rounds")
print(f"{'configuration':>26} {'tokens/s':>10} {'ratio vs ' + reference:>34} {'(rounds)':>13} {'idle %':>7} {'plan bubble %':>14}")
for n in names:
    median = statistics.median(runs[(r, n)] for r in range(1, rounds + 1))
    ratios = [runs[(r, n)] / runs[(r, reference)] for r in range(1, rounds + 1)]
    idles = [idle(r, n) for r in range(1, rounds + 1)]
    idle_text = f"{statistics.median(idles):.1f}" if None not in idles else "-"
    plan = f"{bubble:.1f}" if bubble is not None and n.startswith("pipeline") else "-"
    print(f"{n:>26} {median:10.0f} {statistics.median(ratios):34.3f} [{min(ratios):.3f}-{max(ratios):.3f}] "
          f"{idle_text:>7} {plan:>14}")
EOF
