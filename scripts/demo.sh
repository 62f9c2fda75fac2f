#!/usr/bin/env bash
# The main job: install what is missing, build (preset `default`, -j2), show
# the plugins and devices, then train the Fashion-MNIST MLP example on the
# fastest available backend and print its test accuracy.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j2
build/bin/tandem plugins
build/bin/tandem devices
# A fresh run directory each time, so a second demo never meets the first's checkpoints.
run_dir="runs/demo-$(date +%Y%m%d-%H%M%S)"
build/bin/tandem train examples/fmnist_mlp.toml --run-dir "$run_dir"
