#!/usr/bin/env bash
# The main job: install what is missing, build what the demo runs (preset
# `demo`: the host and the plugins, no tests; the cuda and nccl plugins only
# on a machine with an NVIDIA GPU), show the plugins and devices, then train
# an example on the fastest available backend:
#   scripts/demo.sh        the Fashion-MNIST MLP; prints its test accuracy
#   scripts/demo.sh gpt    the byte-level GPT on Debian's fortune cookies
#                          (about 5 minutes on 2 cores); prints its validation
#                          loss per epoch, then a generated sample
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

example=${1:-mlp}
case $example in
  mlp | gpt) ;;
  *) echo "usage: scripts/demo.sh [mlp|gpt]" >&2; exit 2 ;;
esac

scripts/install-deps.sh
# CUDA kernels take most of a build: compile them where they can run.
gpu=OFF
if [[ -e /dev/nvidiactl ]] || command -v nvidia-smi >/dev/null 2>&1; then gpu=ON; fi
[[ $gpu == ON ]] || echo "demo: no NVIDIA GPU here: the cuda and nccl plugins are not built (scripts/test.sh builds them)"
cmake --preset demo -DTANDEM_BUILD_CUDA=$gpu
cmake --build --preset demo -j2
build/bin/tandem plugins
build/bin/tandem devices
# A fresh run directory each time, so a second demo never meets the first's checkpoints.
run_dir="runs/demo-$example-$(date +%Y%m%d-%H%M%S)"
if [[ $example == mlp ]]; then
  build/bin/tandem train examples/fmnist_mlp.toml --run-dir "$run_dir"
else
  build/bin/tandem train examples/gpt_fortunes.toml --run-dir "$run_dir"
  build/bin/tandem generate examples/gpt_fortunes.toml --weights "$run_dir" --prompt "A " --tokens 400 --seed 1
fi
