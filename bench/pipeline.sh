#!/usr/bin/env bash
# Micro-batches pipelined over two CPU devices, in one invocation: the GPT
# example split over onednn:0 and onednn:1 (bench/models/pipeline/gpt.toml;
# `--plugin-option onednn.devices=2`, one thread each) with --micro
# micro-batches per step, the same in four chunks round robin (interleaved
# 1F1B, bench/models/pipeline/gpt_interleaved.toml), and the example itself
# placed automatically on
# the two devices (cut into two stages balanced by measured op times),
# against
#   - the same split with the pipeline off ([train] pipeline = false: the
#     micro-batches one after another, one device busy at a time),
#   - one onednn device with both threads, on the whole batch
#     (examples/gpt_fortunes.toml) and on the same micro-batches;
# and examples/embedding_cpu.toml (its embedding pinned to the CPU device
# onednn:0, the rest on onednn:1) pipelined against not. Each
# configuration runs once per round, interleaved, --rounds rounds.
# With --gpu: only examples/embedding_cpu.toml, its embedding on the CPU
# and the rest on cuda:0 (the case it was written for), pipelined against
# not.
#
# For each: tokens (samples) per second over the steps after the first (the
# median over rounds; in brackets the lowest and highest ratio of a single
# round against the reference row), the last loss; for the pipelined runs
# the idle share of device time measured (--memory-report) beside the
# bubble `tandem plan` prints.
#
#   bench/pipeline.sh [--steps 30] [--micro 8] [--rounds 3] [--build DIR] [--gpu]
#
# Results go to bench/results/pipeline/ (each run's log and metrics).
# Measure on a quiet machine: uptime is printed before and after.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=30
micro=8
rounds=3
build="$repo/build"
gpu=0
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --micro) micro=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --gpu) gpu=1; shift ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "pipeline.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
tandem="$build/bin/tandem"
[ -x "$tandem" ] || { echo "pipeline.sh: no $tandem; build the tandem, tandem-plugin-onednn and tandem-plugin-grad_accum targets" >&2; exit 2; }
out=${TANDEM_BENCH_OUT:-$repo/bench/results/pipeline}/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
echo "uptime before: $(uptime)" >&2
two=(--plugin-option onednn.devices=2 --threads 2)
common=(--set "train.steps=$steps" --set train.log_every=1 --set train.warmup_steps=5 --memory-report)
gpt_split=("$repo/bench/models/pipeline/gpt.toml" "${two[@]}" --set "train.pipeline_microbatches=$micro")
gpt_one=("$repo/examples/gpt_fortunes.toml" --device onednn:0 --threads 2)
emb=("$repo/examples/embedding_cpu.toml" "${two[@]}" --device onednn:1 --set "train.pipeline_microbatches=$micro")
declare -A config=(
  [gpt-pipelined]="${gpt_split[*]}"
  [gpt-interleaved]="$repo/bench/models/pipeline/gpt_interleaved.toml ${two[*]} --set train.pipeline_microbatches=$micro"
  [gpt-auto-pipelined]="$repo/examples/gpt_fortunes.toml ${two[*]} --device onednn:0,onednn:1 --set train.pipeline_microbatches=$micro"
  [gpt-split-sequential]="${gpt_split[*]} --set train.pipeline=false"
  [gpt-one-device]="${gpt_one[*]}"
  [gpt-one-device-micro]="${gpt_one[*]} --set train.pipeline_microbatches=$micro"
  [embedding-pipelined]="${emb[*]}"
  [embedding-sequential]="${emb[*]} --set train.pipeline=false"
)
order=(gpt-pipelined gpt-interleaved gpt-auto-pipelined gpt-split-sequential gpt-one-device gpt-one-device-micro embedding-pipelined embedding-sequential)
planned=(gpt-pipelined gpt-interleaved gpt-auto-pipelined embedding-pipelined)
if [ "$gpu" = 1 ]; then
  emb=("$repo/examples/embedding_cpu.toml" --device cuda:0 --set "train.pipeline_microbatches=$micro")
  config[embedding-pipelined]="${emb[*]}"
  config[embedding-sequential]="${emb[*]} --set train.pipeline=false"
  order=(embedding-pipelined embedding-sequential)
  planned=(embedding-pipelined)
fi
for round in $(seq 1 "$rounds"); do
  for name in "${order[@]}"; do
    echo "pipeline.sh: round $round, $name" >&2
    run="$out/round$round-$name"
    # shellcheck disable=SC2086 # the configuration's words
    "$tandem" train ${config[$name]} "${common[@]}" --run-dir "$run" > "$run.log" 2>&1 ||
      { tail -20 "$run.log" >&2; exit 1; }
  done
done
for name in "${planned[@]}"; do
  # shellcheck disable=SC2086
  "$tandem" plan ${config[$name]} --set "train.steps=$steps" > "$out/plan-$name.txt" 2>&1 ||
    { cat "$out/plan-$name.txt" >&2; exit 1; }
done
echo "uptime after: $(uptime)" >&2
python3 - "$out" "$rounds" "$micro" "${order[@]}" <<'EOF'
import json, re, statistics, sys
out, rounds, micro, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
# Tokens per sample: the GPT's context; the classifier's samples count once.
per_sample = {n: (128 if n.startswith("gpt") else 1) for n in names}
batch = {n: (32 if n.startswith("gpt") else 64) for n in names}  # [train] batch_size of each model
reference = {n: ("gpt-split-sequential" if n.startswith("gpt") else "embedding-sequential") for n in names}

def rate(round_, name):  # tokens/s between the end of step 1 and the last step of epoch 1
    rows = [json.loads(l) for l in open(f"{out}/round{round_}-{name}/metrics.jsonl")]
    steps = sorted((r for r in rows if r.get("event") == "step" and r["epoch"] == 1), key=lambda r: r["step"])
    # samples_per_second is the epoch's so far: its seconds are samples / rate.
    seconds = lambda r: r["step"] * batch[name] / r["samples_per_second"]
    first, last = steps[0], steps[-1]
    tokens = (last["step"] - first["step"]) * batch[name] * per_sample[name]
    return tokens / (seconds(last) - seconds(first)), last["loss"]

def idle(round_, name):
    text = open(f"{out}/round{round_}-{name}.log").read()
    m = re.search(r"idle ([0-9.]+)% of device time", text)
    return (float(m.group(1)), None) if m else (None, None)

def plan_bubble(name):
    try:
        text = open(f"{out}/plan-{name}.txt").read()
    except FileNotFoundError:
        return None
    m = re.search(r"bubble \(S-1\)/\((?:v\*)?M\+S-1\) = ([0-9.]+) %", text)
    return float(m.group(1)) if m else None

runs = {(r, n): rate(r, n) for r in range(1, rounds + 1) for n in names}
print(f"pipeline.sh: {micro} micro-batches per step, {rounds} rounds")
print(f"{'configuration':>22} {'tokens/s':>10} {'vs':>22} {'ratio':>6} {'(rounds)':>13} {'idle %':>7} {'plan bubble %':>14}")
for n in names:
    median = statistics.median(runs[(r, n)][0] for r in range(1, rounds + 1))
    ref = reference[n]
    ratios = [runs[(r, n)][0] / runs[(r, ref)][0] for r in range(1, rounds + 1)]
    idles = [idle(r, n)[0] for r in range(1, rounds + 1)]
    idle_text = f"{statistics.median(idles):.1f}" if None not in idles else "-"
    bubble = plan_bubble(n)
    print(f"{n:>22} {median:10.0f} {ref:>22} {statistics.median(ratios):6.3f} "
          f"[{min(ratios):.3f}-{max(ratios):.3f}] {idle_text:>7} {('%.1f' % bubble) if bubble is not None else '-':>14}")
if "gpt-one-device" not in names:
    sys.exit(0)
one = statistics.median(runs[(r, "gpt-one-device")][0] for r in range(1, rounds + 1))
pipe = statistics.median(runs[(r, "gpt-pipelined")][0] for r in range(1, rounds + 1))
print(f"gpt-pipelined / gpt-one-device (2 threads, whole batch): {pipe / one:.3f}")
EOF
