#!/usr/bin/env bash
# The ctest test fuzz.<target>: runs one fuzzer for SECONDS over a copy of
# its committed corpus (libFuzzer adds what it finds to the corpus it is
# given; the committed one must not change). Fails on any crash, leak, UB,
# timeout (10 s for one input) or memory beyond 2 GiB, and says how to
# reproduce; exits 77 (SKIPPED) with the reason when the fuzzers cannot be
# built here.
#
# usage: run_fuzzer.sh FUZZER CORPUS SCRATCH SECONDS [SKIP_REASON]
set -uo pipefail
fuzzer=$1 corpus=$2 scratch=$3 seconds=$4 skip=${5:-}
if [[ -n "$skip" ]]; then
  echo "SKIPPED: $skip"
  exit 77
fi
if [[ ! -x "$fuzzer" ]]; then
  echo "FAILED: $fuzzer is missing: build the tandem_fuzzers target (cmake --build BUILD --target tandem_fuzzers)"
  exit 1
fi
if ! compgen -G "$corpus/*" >/dev/null; then
  echo "FAILED: the seed corpus $corpus is empty"
  exit 1
fi

rm -rf "$scratch"
mkdir -p "$scratch/corpus" "$scratch/crashes"
cp "$corpus"/* "$scratch/corpus/"
name=$(basename "$fuzzer" _fuzzer)
dict="$corpus/../../$name.dict"  # tests/fuzz/<target>.dict, where there is one
args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
  -artifact_prefix="$scratch/crashes/")
[[ -f "$dict" ]] && args+=(-dict="$dict")

"$fuzzer" "${args[@]}" "$scratch/corpus" >"$scratch/log" 2>&1
rc=$?
# The seed inputs' coverage, the last progress line and the totals.
grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::(number_of_executed_units|new_units_added)' "$scratch/log"
found=$(find "$scratch/crashes" -type f | sort)
if ((rc != 0)) || [[ -n "$found" ]]; then
  tail -n 60 "$scratch/log"
  echo "FAILED: $name fuzzer exited with $rc; its input(s):"
  for f in $found; do echo "  $f"; done
  echo "reproduce: $fuzzer FILE; fix the reader, then add FILE to tests/fuzz/corpus/$name and a regression test"
  exit 1
fi
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/log")
if [[ -z "$runs" || "$runs" -eq 0 ]]; then
  tail -n 20 "$scratch/log"
  echo "FAILED: the fuzzer ran no input"
  exit 1
fi
echo "$name: $runs inputs in ${seconds} s, no crash, leak or timeout"
