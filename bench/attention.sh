#!/usr/bin/env bash
# The onednn plugin's fused attention and its gradient against PyTorch's
# scaled_dot_product_attention, one shape (default: bench/models/gpt.toml's,
# B=32, H=6, T=128, D=32, causal), on 1 and 2 threads:
#
#   bench/attention.sh [--build DIR] [--threads "1 2"] [--shape B,H,T,D] [--repeats N] [--rounds N]
#
# Builds tandem-attention-bench (bench/attention_kernels.cpp) in DIR (default
# build/), then runs it and bench/torch_attention.py in turn, --rounds times
# (default 3), and prints per thread count each side's median launch in ms
# (the median over rounds of each round's median) and PyTorch's time over
# Tandem's. Tandem reads q, k, v in layout "bthd" as the GPT's training
# graph does; PyTorch in its own contiguous [B, H, T, D]. ONEDNN_MAX_CPU_ISA
# below AVX-512 caps the peer alike, as bench/run.sh does (torch's own
# kernels through ATEN_CPU_CAPABILITY=avx2, MKL's through
# MKL_ENABLE_INSTRUCTIONS=AVX2); otherwise both pick their widest. The peer is
# PyPI's PyTorch set up by bench/run.sh (under $TANDEM_BENCH_CACHE), else
# the system's python3 if its torch has scaled_dot_product_attention.
# The machine must be quiet: the load average is printed before and after.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=$repo/build threads="1 2" shape=32,6,128,32 repeats=40 rounds=3
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2 ;;
    --threads) threads=$2 ;;
    --shape) shape=$2 ;;
    --repeats) repeats=$2 ;;
    --rounds) rounds=$2 ;;
    *) echo "usage: bench/attention.sh [--build DIR] [--threads \"1 2\"] [--shape B,H,T,D] [--repeats N] [--rounds N]" >&2
       exit 2 ;;
  esac
  shift 2
done

cmake --build "$build" --target tandem-attention-bench -j2 >&2
bench_bin=$(find "$build" -name tandem-attention-bench -type f -perm -u+x | head -1)
# Not the copy a tested build keeps under onednn3/ (built against Debian 13's
# oneDNN 3 by scripts/check-onednn3.sh, which this system cannot load).
plugin=$(find "$build" -path "$build/onednn3" -prune -o -name libtandem-onednn.so -type f -print | head -1)
[ -n "$bench_bin" ] && [ -n "$plugin" ] || { echo "attention.sh: no tandem-attention-bench or onednn plugin under $build" >&2; exit 1; }

case "${ONEDNN_MAX_CPU_ISA:-ALL}" in
  ALL | all | AVX512* | avx512*) peer_env=(-u MKL_ENABLE_INSTRUCTIONS -u ATEN_CPU_CAPABILITY) ;;
  *) peer_env=(MKL_ENABLE_INSTRUCTIONS=AVX2 ATEN_CPU_CAPABILITY=avx2) ;;
esac

cache=${TANDEM_BENCH_CACHE:-$HOME/.cache/tandem-bench}
peer=
for python in "$cache/venv/bin/python" /usr/bin/python3; do
  if [ -x "$python" ] && "$python" -c 'import torch.nn.functional as F; F.scaled_dot_product_attention' 2>/dev/null; then
    peer=$python
    break
  fi
done
[ -n "$peer" ] || echo "attention.sh: no PyTorch with scaled_dot_product_attention (run bench/run.sh once to set one up); Tandem only" >&2

echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores;" \
  "ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-unset}; peer: ${peer_env[*]}; shape $shape causal; $rounds rounds of $repeats launches"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for t in $threads; do
  for round in $(seq "$rounds"); do
    "$bench_bin" --plugin "$plugin" --threads "$t" --shape "$shape" --repeats "$repeats" |
      sed 's/^{/{"side": "tandem", /' >> "$results"
    if [ -n "$peer" ]; then
      env "${peer_env[@]}" "$peer" "$repo/bench/torch_attention.py" --threads "$t" --shape "$shape" --repeats "$repeats" |
        sed 's/^{/{"side": "pytorch", /' >> "$results"
    fi
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
torch = next((r["torch"] for r in rows if "torch" in r), None)
print(f"{'threads':>7}  {'':8}  {'Tandem ms':>10}  {'PyTorch ms':>10}  {'ratio':>6}")
for t in sorted({r["threads"] for r in rows}):
    for part in ("forward", "grad"):
        med = {}
        for side in ("tandem", "pytorch"):
            xs = [r[part + "_ms"]["median"] for r in rows if r["side"] == side and r["threads"] == t]
            med[side] = statistics.median(xs) if xs else None
        ratio = f"{med['pytorch'] / med['tandem']:.2f}x" if med["pytorch"] else "-"
        peer = f"{med['pytorch']:.3f}" if med["pytorch"] else "-"
        print(f"{t:>7}  {part:8}  {med['tandem']:>10.3f}  {peer:>10}  {ratio:>6}")
if torch:
    print(f"peer: PyTorch {torch}, scaled_dot_product_attention, layout [B, H, T, D]")
PY
