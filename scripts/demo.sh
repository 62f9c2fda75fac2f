#!/usr/bin/env bash
# The main job: install what is missing, configure with the `default` preset,
# build, and show what the host finds (plugins, devices).
# (Once the training engine lands this becomes a real training run.)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j2
build/bin/tandem plugins
build/bin/tandem devices
