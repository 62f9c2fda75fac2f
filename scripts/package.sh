#!/usr/bin/env bash
# Builds the deb and rpm packages: configures build-package/ with
# CMAKE_INSTALL_PREFIX=/usr (the host compiles its plugin directory in, so
# packages must be built for the prefix they install to), without tests and
# without a fallback directory for the CUDA libraries (a package finds them
# through the system's library paths), builds, and runs CPack. Packages land in build-package/packages/.
#
#   scripts/package.sh [<build dir>]     (default: build-package)
#   TANDEM_PACKAGE_GENERATORS="DEB"  scripts/package.sh   # only the deb
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=${1:-build-package}
generators=${TANDEM_PACKAGE_GENERATORS:-DEB;RPM}
jobs=${TANDEM_JOBS:-2}

scripts/install-deps.sh
cmake -S . -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX=/usr \
  -DTANDEM_BUILD_TESTS=OFF \
  -DTANDEM_CUDA_FALLBACK_LIBRARY_DIR=
cmake --build "$build" -j "$jobs"
rm -rf "$build/packages"
(cd "$build" && cpack -G "$generators" -B "$PWD/packages")
# CPack keeps its staging trees under packages/_CPack_Packages; only the packages matter.
rm -rf "$build/packages/_CPack_Packages"
ls -l "$build"/packages/*.deb "$build"/packages/*.rpm 2>/dev/null || ls -l "$build/packages"
