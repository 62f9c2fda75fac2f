#!/usr/bin/env bash
# A longer fuzzing campaign than ctest's 30 s per target (tests/fuzz): builds
# the fuzzers with clang++ (libFuzzer, ASan, UBSan) and runs each in turn
# for the given time at nice 19, over a corpus that starts from the
# committed seeds and grows in the output directory (so a second campaign
# with the same --out goes on from the first). Prints executions, coverage
# (libFuzzer's cov: edges, ft: features) and what was found per target;
# exits 1 when anything was found.
#
# usage: scripts/fuzz-campaign.sh [--time SECONDS] [--out DIR] [--jobs N] [TARGET...]
#   --time  per target, default 3600
#   --out   default ${TMPDIR:-/tmp}/tandem-fuzz; must be outside the source tree
#   --jobs  parallel compile jobs for the build, default 1
#   TARGET  model idx csv safetensors calibration elf (default: all)
# A crash, leak, UB, timeout (10 s) or memory beyond 2 GiB is written to
# OUT/crashes/TARGET/; reproduce with OUT/build/TARGET_fuzzer FILE.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=3600
out=${TMPDIR:-/tmp}/tandem-fuzz
jobs=1
targets=()
while (($#)); do
  case $1 in
    --time) seconds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=(model idx csv safetensors calibration elf)

mkdir -p "$out"
out=$(cd "$out" && pwd)
if [[ "$out/" == "$repo/"* ]]; then
  echo "--out $out is inside the source tree; choose a directory outside it" >&2
  exit 2
fi
cxx=$(command -v clang++ || true)
if [[ -z "$cxx" ]]; then
  echo "clang++ not found: install clang (Debian's has libFuzzer)" >&2
  exit 2
fi

echo "== building the fuzzers in $out/build"
nice -n 19 cmake -S "$repo/tests/fuzz" -B "$out/build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
nice -n 19 cmake --build "$out/build" --parallel "$jobs"

summary=()
found_any=0
for t in "${targets[@]}"; do
  fuzzer=$out/build/${t}_fuzzer
  [[ -x "$fuzzer" ]] || { echo "no fuzzer named $t" >&2; exit 2; }
  mkdir -p "$out/corpus/$t" "$out/crashes/$t"
  for seed in "$repo/tests/fuzz/corpus/$t/"*; do  # seeds not already there
    [[ -e "$out/corpus/$t/$(basename "$seed")" ]] || cp "$seed" "$out/corpus/$t/"
  done
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    -artifact_prefix="$out/crashes/$t/")
  [[ -f "$repo/tests/fuzz/$t.dict" ]] && args+=(-dict="$repo/tests/fuzz/$t.dict")
  log=$out/$t.log
  echo "== $t: ${seconds} s, log $log"
  rc=0
  nice -n 19 "$fuzzer" "${args[@]}" "$out/corpus/$t" >"$log" 2>&1 || rc=$?
  # Coverage from the last progress line (the final DONE line, or the last
  # before a crash), executions from the final stats.
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  corpus=$(find "$out/corpus/$t" -type f | wc -l)
  crashes=$(find "$out/crashes/$t" -type f | wc -l)
  verdict="ok"
  if ((rc != 0 || crashes > 0)); then
    found_any=1
    verdict="FOUND (exit $rc): $(grep -m1 -E '^==[0-9]+==ERROR|runtime error|reader broke' "$log" || echo see log)"
    find "$out/crashes/$t" -type f | sed 's/^/    /'
  fi
  summary+=("$(printf '%-12s %12s %8s %8s %8s  %s' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corpus" "$verdict")")
done

printf '\n%-12s %12s %8s %8s %8s  %s\n' target executions cov ft corpus result
printf '%s\n' "${summary[@]}"
echo "crashes, if any: $out/crashes/TARGET/; reproduce: $out/build/TARGET_fuzzer FILE"
exit "$found_any"
