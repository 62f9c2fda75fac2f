#!/usr/bin/env bash
# The GPU checks in one run, for a machine with an NVIDIA GPU and the
# project's build dependencies (scripts/install-deps.sh), or a bundle of the
# build (scripts/gpu-bundle.sh). Builds what they need for this GPU's
# architecture only (a full build compiles the CUDA kernels for every
# supported GPU), then, in this order:
#   scale    bench/gpu_scale.sh: GPT-2 small (124 M, 16 x 1024 tokens) in
#            bf16 against PyTorch eager and torch.compile, and beside it
#            Tandem with amp's wide_products = false; tokens/s, MFU against
#            the measured bf16 peak, planned against measured device memory;
#   conform  cuda:0 against reference on every case of the op catalogue
#            (tandem-conformance --verbose: each case's implementation);
#   stream   bench/streaming.sh on cuda:0: GPT-2 small with every layer's
#            parameters, gradients and AdamW state streamed from host memory
#            against the same model resident: throughput ratio, final
#            weights (bit-identical when streaming changes no number);
#   profile  tandem bench --profile of GPT-2 small: time per op and the
#            slowest nodes (one synchronisation per node);
#   llama    bench/gpu_scale.sh --quick of the 1.24 B Llama, Tandem alone;
#   tests    the cuda and nccl tests, and the pipeline with a stage on the
#            GPU (PipelineOnAGpu): every GPU test runs, or says SKIPPED
#            and why (two-GPU tests on a one-GPU machine);
#   memory   tandem bench of bench/models/gpt.toml and cnn.toml on cuda:0:
#            planned against measured device peak;
#   costs    tandem bench of the GPT on cuda:0 as it is, with amp bf16,
#            with amp f16 and with gradient clipping: what each costs a step;
#   peer     bench/torch_peer.py --device cuda on the same GPT and CNN;
#   place    bench/placement.sh --devices cuda:0,onednn:0;
#   pipeline bench/pipeline.sh --gpu: examples/embedding_cpu.toml's
#            embedding on the CPU, the rest on cuda:0, pipelined against not;
#   kernels  bench/gpu_kernels.sh: the reductions' bandwidth, old and new.
# Each step runs under its own time limit and all of them within
# --deadline seconds (default 540): a step that would start with less than
# 20 s left is skipped and says so. Each step's whole output is kept in the
# results directory (--out, default bench/results/gpu-checks-<stamp>/); the
# terminal gets a line per step and, last, the table of every step and the
# scale figures. A failing step does not stop the others.
#
#   scripts/gpu-checks.sh [--build DIR] [--no-build] [--jobs N] [--only STEP,...] [--out DIR]
#                         [--deadline SECONDS]
#
# Exit status: 0 every step passed, 1 a step failed or ran out of time,
# 2 usage or build failure, 77 no usable GPU (nothing measured).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build-gpu"
do_build=1
jobs=$(nproc)
only="scale,conform,stream,profile,llama,tests,memory,costs,peer,place,pipeline,kernels"
out=""
deadline=540
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --jobs) jobs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --deadline) deadline=$2; shift 2 ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    *) echo "gpu-checks.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

# The GPU's compute capability, e.g. 9.0 -> 90: the one architecture built.
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
if [ -z "$cc" ]; then
  echo "gpu-checks.sh: no usable GPU (nvidia-smi answers no compute capability); nothing measured" >&2
  exit 77
fi
[ -n "$out" ] || out="$repo/bench/results/gpu-checks-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
echo "gpu-checks: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)," \
  "sm_$cc; results in $out"

# What the steps run, not the whole tree.
targets=(tandem tandem-plugin-cuda tandem-plugin-nccl tandem-plugin-reference tandem-plugin-onednn tandem-plugin-amp
  tandem-conformance tandem-gpu-kernels-bench tandem_cuda_host_tests tandem_cuda_plugin_tests
  tandem_cuda_graph_tests tandem_cuda_vendor_tests tandem_nccl_host_tests tandem_nccl_plugin_tests
  tandem_train_tests)
if [ "$do_build" = 1 ]; then
  echo "gpu-checks: building for sm_$cc in $build ($jobs jobs)"
  start=$SECONDS
  if ! { cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_CUDA=ON \
           -DCMAKE_CUDA_ARCHITECTURES="$cc" &&
         cmake --build "$build" -j "$jobs" --target "${targets[@]}"; } > "$out/build.log" 2>&1; then
    echo "gpu-checks: the build failed, see $out/build.log:" >&2
    tail -20 "$out/build.log" >&2
    exit 2
  fi
  echo "gpu-checks: built in $((SECONDS - start)) s"
fi
tandem="$build/bin/tandem"
[ -x "$tandem" ] || { echo "gpu-checks.sh: no $tandem; build first (drop --no-build)" >&2; exit 2; }

failed=0
began=$SECONDS
summary=()
wanted() { [[ ",$only," == *",$1,"* ]]; }
# step NAME LIMIT COMMAND...: runs it for at most LIMIT seconds (less when
# the deadline is nearer), keeps its output, prints its last lines.
# COMMAND "fn F" runs this script's shell function F in a child bash.
step() {
  local name=$1 limit=$2
  shift 2
  wanted "$name" || return 0
  [ "$1" = fn ] && set -- bash -c "$(declare -f "$2"); $2"
  local left=$((deadline - (SECONDS - began)))
  if [ "$left" -lt 20 ]; then
    summary+=("$(printf '%-8s %-22s %5s  %s' "$name" "skipped (out of time)" "-" "")")
    failed=1
    return 0
  fi
  [ "$limit" -le "$left" ] || limit=$left
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$out/$name.log" 2>&1
  local status=$?
  local verdict="passed"
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    verdict="stopped at its ${limit} s"
  elif [ "$status" -ne 0 ]; then
    verdict="failed (exit $status)"
  fi
  echo
  echo "== $name: $verdict, $((SECONDS - start)) s ($out/$name.log)"
  if [ "$status" -ne 0 ]; then
    failed=1
    tail -3 "$out/$name.log" | sed 's/^  */  /'
  fi
  summary+=("$(printf '%-8s %-22s %5s' "$name" "$verdict" "$((SECONDS - start))")")
  return 0
}
# What the steps that are shell functions read in their child bash.
export repo build tandem out

# shellcheck disable=SC2317  # called through step
scale() {
  TANDEM_BENCH_OUT="$out/scale" "$repo/bench/gpu_scale.sh" --build "$build" --models gpt2_small --compare-wide
}
step scale 240 fn scale
wanted scale && grep -E '^(bf16 matrix peak|model |gpt2_small )' "$out/scale.log"

step conform 150 "$build/bin/tandem-conformance" --plugin "$build/lib/tandem/plugins/libtandem-cuda.so" \
  --reference "$build/lib/tandem/plugins/libtandem-reference.so" --verbose
wanted conform && tail -5 "$out/conform.log"

# shellcheck disable=SC2317
stream() {
  TANDEM_BENCH_OUT="$out/stream" "$repo/bench/streaming.sh" --build "$build" --device cuda:0 \
    --model bench/models/gpu/gpt2_small.toml --feature amp:dtype=bf16 --steps 10 --fraction 1 --every
}
step stream 120 fn stream
wanted stream && grep -E '^(resident|streamed|throughput)' "$out/stream.log"


step profile 60 "$tandem" bench "$repo/bench/models/gpu/gpt2_small.toml" --device cuda:0 \
  --feature amp:dtype=bf16 --steps 3 --warmup 2 --repeats 1 --profile-nodes 15
wanted profile && tail -40 "$out/profile.log"

# shellcheck disable=SC2317
llama() {
  TANDEM_BENCH_OUT="$out/scale" "$repo/bench/gpu_scale.sh" --build "$build" --models llama_1b --quick --no-peer
}
step llama 240 fn llama
wanted llama && grep -E '^(model |llama_1b )' "$out/llama.log"

# shellcheck disable=SC2317
tests() {
  if [ -f "$build/CTestTestfile.cmake" ]; then
    ctest --test-dir "$build" -R '^(cuda|nccl)\.|PipelineOnAGpu' --output-on-failure -j 4
    return
  fi
  # A bundle has the test programs without CTest's files; they look for the
  # plugins where the build put them, which then leads to the bundle's.
  local status=0 program built
  built=$(grep -aom1 '/[^[:space:]"]*/lib/tandem/plugins' "$build/bin/tandem_cuda_plugin_tests" | head -1)
  built=${built%/lib/tandem/plugins}
  if [ -n "$built" ] && [ ! -e "$built/lib" ]; then
    mkdir -p "$built" && ln -s "$(cd "$build" && pwd)/lib" "$built/lib"
  fi
  for program in "$build"/bin/tandem_cuda_*_tests "$build"/bin/tandem_nccl_*_tests; do
    [ -x "$program" ] || continue
    echo "== $(basename "$program")"
    "$program" --gtest_brief=1 || status=1
  done
  if [ -x "$build/bin/tandem_train_tests" ]; then
    echo "== tandem_train_tests (PipelineOnAGpu)"
    "$build/bin/tandem_train_tests" --gtest_brief=1 --gtest_filter='PipelineOnAGpu.*' || status=1
  fi
  return "$status"
}
step tests 90 fn tests
wanted tests && grep -E 'tests passed|tests failed|PASSED|FAILED|SKIPPED' "$out/tests.log" | head -20

# shellcheck disable=SC2317
memory() {
  for model in gpt cnn; do
    "$tandem" bench "$repo/bench/models/$model.toml" --device cuda:0 --steps 20 --repeats 3 || return 1
  done
}
step memory 60 fn memory
wanted memory && grep -E '^bench |samples/s|peak RSS' "$out/memory.log"

# shellcheck disable=SC2317
costs() {
  local gpt="$repo/bench/models/gpt.toml" common=(--device cuda:0 --steps 20 --warmup 5 --repeats 3)
  "$tandem" bench "$gpt" "${common[@]}" &&
    "$tandem" bench "$gpt" "${common[@]}" --feature amp:dtype=bf16 &&
    "$tandem" bench "$gpt" "${common[@]}" --feature amp:dtype=f16 &&
    "$tandem" bench "$gpt" "${common[@]}" --set train.clip_grad_norm=1.0
}
step costs 60 fn costs
wanted costs && grep -E '^bench |features|  step ' "$out/costs.log"

# shellcheck disable=SC2317
peer() {
  if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
    echo "SKIPPED: python3 has no PyTorch that sees a GPU"
    return 0
  fi
  for model in gpt cnn; do
    python3 "$repo/bench/torch_peer.py" "$repo/bench/models/$model.toml" --device cuda --threads "$(nproc)" \
      --steps 20 --warmup 5 --repeats 3 || return 1
  done
}
step peer 60 fn peer
wanted peer && cat "$out/peer.log"

step place 120 "$repo/bench/placement.sh" --build "$build" --devices cuda:0,onednn:0 --steps 200
wanted place && grep -vE '^uptime' "$out/place.log"

step pipeline 60 env TANDEM_BENCH_OUT="$out/pipeline" "$repo/bench/pipeline.sh" --build "$build" --gpu \
  --rounds 2 --steps 30
wanted pipeline && grep -E '^(pipeline.sh| *configuration| *embedding)' "$out/pipeline.log"

kernels_build=()
[ "$do_build" = 1 ] || kernels_build=(--no-build)
step kernels 90 env TANDEM_BENCH_OUT="$out" "$repo/bench/gpu_kernels.sh" --build "$build" "${kernels_build[@]}"
wanted kernels && tail -15 "$out/kernels.log"

echo
echo "gpu-checks: $((SECONDS - began)) s of steps (deadline $deadline s); results in $out"
printf '%-8s %-22s %5s\n' step result s
for line in "${summary[@]}"; do echo "$line"; done
if [ -d "$out/scale" ] && python3 -c 'import tomllib' 2> /dev/null; then
  models=""
  [ -f "$out/scale/gpt2_small-tandem.json" ] && models="gpt2_small"
  [ -f "$out/scale/llama_1b-tandem.json" ] && models="$models llama_1b"
  [ -n "$models" ] && python3 "$repo/bench/gpu_scale.py" table --dir "$out/scale" --models "$models"
fi
exit "$failed"
