#!/usr/bin/env bash
# The GPU checks in one run, for a machine with an NVIDIA GPU and the
# project's build dependencies (scripts/install-deps.sh). Builds what they
# need for this GPU's architecture only (a full build compiles the CUDA
# kernels for every supported GPU), then:
#   1. tests    the cuda and nccl tests: every GPU test runs, or says
#               SKIPPED and why (two-GPU tests on a one-GPU machine);
#   2. conform  cuda:0 against reference on every case of the op catalogue
#               (tandem-conformance --verbose: each case's implementation);
#   3. memory   tandem bench of bench/models/gpt.toml and cnn.toml on
#               cuda:0: planned against measured device peak;
#   4. place    bench/placement.sh --devices cuda:0,onednn:0: estimated and
#               measured step, copies per step and the share hidden behind
#               compute, planned against measured peak of cuda:0;
#   5. kernels  bench/gpu_kernels.sh: the reductions' bandwidth against the
#               GPU's peak, old and new kernels;
#   6. costs    tandem bench of the GPT on cuda:0 as it is, with amp bf16,
#               with amp f16 (its overflow check sums every gradient) and
#               with gradient clipping (likewise): what each costs a step;
#   7. peer     bench/torch_peer.py --device cuda on the same GPT and CNN,
#               where python3 has a PyTorch that sees the GPU;
#   8. scale    bench/gpu_scale.sh: GPT-2 small (124 M, 16 x 1024 tokens)
#               and the 1.24 B Llama (--quick) in bf16 against PyTorch
#               eager and torch.compile: tokens/s, MFU against the measured
#               bf16 peak, planned against measured device memory.
# Each step's whole output is kept in bench/results/gpu-checks-<stamp>/;
# the terminal gets a summary. A failing step does not stop the others.
#
#   scripts/gpu-checks.sh [--build DIR] [--no-build] [--jobs N] [--only STEP,...]
#
# Exit status: 0 every step passed, 1 a step failed, 2 usage or build
# failure, 77 no usable GPU (nothing measured).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build-gpu"
do_build=1
jobs=$(nproc)
only="tests,conform,memory,place,kernels,costs,peer,scale"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --jobs) jobs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "gpu-checks.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

# The GPU's compute capability, e.g. 9.0 -> 90: the one architecture built.
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
if [ -z "$cc" ]; then
  echo "gpu-checks.sh: no usable GPU (nvidia-smi answers no compute capability); nothing measured" >&2
  exit 77
fi
out="$repo/bench/results/gpu-checks-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
echo "gpu-checks: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)," \
  "sm_$cc; results in $out"

# What the steps run, not the whole tree.
targets=(tandem tandem-plugin-cuda tandem-plugin-nccl tandem-plugin-reference tandem-plugin-onednn tandem-plugin-amp
  tandem-conformance tandem-gpu-kernels-bench tandem_cuda_host_tests tandem_cuda_plugin_tests
  tandem_cuda_graph_tests tandem_cuda_vendor_tests tandem_nccl_host_tests tandem_nccl_plugin_tests)
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
wanted() { [[ ",$only," == *",$1,"* ]]; }
# step NAME COMMAND...: runs it, keeps its output, prints its last lines.
step() {
  local name=$1
  shift
  wanted "$name" || return 0
  local start=$SECONDS
  "$@" > "$out/$name.log" 2>&1
  local status=$?
  echo
  echo "== $name: exit $status, $((SECONDS - start)) s ($out/$name.log)"
  if [ "$status" -ne 0 ]; then
    failed=1
    tail -3 "$out/$name.log" | sed 's/^/  /'
  fi
  return 0
}

step tests ctest --test-dir "$build" -R '^(cuda|nccl)\.' --output-on-failure -j 4
if wanted tests; then
  grep -E 'tests passed|tests failed' "$out/tests.log"
  grep -E '\(Skipped\)|\*\*\*Failed' "$out/tests.log" | sed 's/^/  /'
fi

step conform "$build/bin/tandem-conformance" --plugin "$build/lib/tandem/plugins/libtandem-cuda.so" \
  --reference "$build/lib/tandem/plugins/libtandem-reference.so" --verbose
wanted conform && tail -5 "$out/conform.log"

# shellcheck disable=SC2317  # called through step
memory() {
  for model in gpt cnn; do
    "$tandem" bench "$repo/bench/models/$model.toml" --device cuda:0 --steps 20 --repeats 3 || return 1
  done
}
step memory memory
wanted memory && grep -E '^bench |samples/s|peak RSS' "$out/memory.log"

step place "$repo/bench/placement.sh" --build "$build" --devices cuda:0,onednn:0 --steps 200
wanted place && grep -vE '^uptime' "$out/place.log"

kernels_build=()
[ "$do_build" = 1 ] || kernels_build=(--no-build)
step kernels env TANDEM_BENCH_OUT="$out" "$repo/bench/gpu_kernels.sh" --build "$build" "${kernels_build[@]}"
wanted kernels && tail -15 "$out/kernels.log"

# shellcheck disable=SC2317  # called through step
costs() {
  local gpt="$repo/bench/models/gpt.toml" common=(--device cuda:0 --steps 20 --warmup 5 --repeats 3)
  "$tandem" bench "$gpt" "${common[@]}" &&
    "$tandem" bench "$gpt" "${common[@]}" --feature amp:dtype=bf16 &&
    "$tandem" bench "$gpt" "${common[@]}" --feature amp:dtype=f16 &&
    "$tandem" bench "$gpt" "${common[@]}" --set train.clip_grad_norm=1.0
}
step costs costs
wanted costs && grep -E '^bench |features|  step ' "$out/costs.log"

# shellcheck disable=SC2317  # called through step
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
step peer peer
wanted peer && cat "$out/peer.log"

# shellcheck disable=SC2317  # called through step
scale() {
  TANDEM_BENCH_OUT="$out/scale" "$repo/bench/gpu_scale.sh" --build "$build" --models gpt2_small &&
    TANDEM_BENCH_OUT="$out/scale" "$repo/bench/gpu_scale.sh" --build "$build" --models llama_1b --quick
}
step scale scale
wanted scale && grep -E '^(bf16 matrix peak|model |gpt2_small |llama_1b )' "$out/scale.log"

exit "$failed"
