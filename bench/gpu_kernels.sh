#!/usr/bin/env bash
# The CUDA plugin's deterministic reductions (layer_norm's and rms_norm's
# parameter gradients, the dbias of linear and conv2d, embedding_grad) at
# transformer sizes, against the kernels they replaced: time per launch and
# achieved bandwidth as a share of the GPU's peak (bench/README.md).
#
#   bench/gpu_kernels.sh [--build DIR] [--no-build] [--device N] [--quick]
#
# Builds the tandem-gpu-kernels-bench target in DIR (default build/, a
# build configured with -DTANDEM_BUILD_CUDA=ON and a CUDA toolkit; with
# --no-build, DIR/bin must already hold it, e.g. a build copied to a GPU
# machine without the toolchain or sources), runs it
# and keeps its table in $TANDEM_BENCH_OUT (default bench/results/). Exit
# status is the program's: 0 measured, 1 a CUDA error or a failed check,
# 2 usage, 77 no usable GPU (nothing measured).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build"
args=()
do_build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --device) args+=(--device "$2"); shift 2 ;;
    --quick) args+=(--quick); shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "gpu_kernels.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ "$do_build" = 1 ]; then
  [ -f "$build/CMakeCache.txt" ] ||
    { echo "gpu_kernels.sh: $build is not a configured build (cmake -S . -B build -DTANDEM_BUILD_CUDA=ON)" >&2; exit 2; }
  cmake --build "$build" --target tandem-gpu-kernels-bench >&2 ||
    { echo "gpu_kernels.sh: could not build tandem-gpu-kernels-bench in $build: is the cuda plugin part of it (CUDA toolkit and cuDNN found, TANDEM_BUILD_CUDA=ON)?" >&2; exit 2; }
fi
[ -x "$build/bin/tandem-gpu-kernels-bench" ] ||
  { echo "gpu_kernels.sh: no $build/bin/tandem-gpu-kernels-bench; build it (drop --no-build)" >&2; exit 2; }
out=${TANDEM_BENCH_OUT:-$repo/bench/results}
mkdir -p "$out"
table="$out/gpu_kernels-$(date +%Y%m%d-%H%M%S).txt"
set +e
"$build/bin/tandem-gpu-kernels-bench" "${args[@]}" | tee "$table"
status=${PIPESTATUS[0]}
set -e
[ "$status" -eq 77 ] && rm -f "$table"
exit "$status"
