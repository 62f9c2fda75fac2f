#!/usr/bin/env bash
# Installs the Debian 12 (bookworm) packages Tandem needs to build, test and
# package. Idempotent: when everything is already installed it only asks
# dpkg-query and returns (no apt-get update, no network).
# Uses sudo when not run as root. Non-interactive.
set -euo pipefail

packages=(
  # toolchain and build system
  build-essential cmake ninja-build pkg-config
  # host: Boost.DLL (header-only in 1.74) is the plugin loader; CLI options; paths
  libboost-dev libboost-program-options-dev libboost-filesystem-dev
  # tests
  libgtest-dev libgmock-dev
  # tests that read what tandem writes with the other side's own code: a venv
  # for ONNX Runtime and TensorBoard from PyPI (export.onnx, report.*),
  # Debian's PyTorch for the exported weights (export.torch)
  python3-venv python3-torch
  # packaging: rpmbuild for CPack RPM, dpkg-shlibdeps for CPack DEB, file(1),
  # and the linters the packaging.lint test runs on the packages
  rpm dpkg-dev file lintian rpmlint
  # SDK ABI guard (abidw/abidiff) and formatting check
  abigail-tools clang-format
  # fuzzers (tests/fuzz): clang, and libFuzzer with the sanitizer runtimes
  # (only recommended by clang, and apt here installs no recommendations)
  clang libclang-rt-dev
  # model files (TOML), JSON reports and checkpoints, compressed data sets
  libtomlplusplus-dev nlohmann-json3-dev zlib1g-dev
  # `tandem export --format onnx` (ONNX's protobuf classes and checker)
  libonnx-dev libprotobuf-dev
  # tokenizers of Hugging Face models: PCRE2 runs tokenizer.json's patterns,
  # ICU normalizes to NFC, libsentencepiece reads tokenizer.model
  libpcre2-dev libicu-dev libsentencepiece-dev
  # onednn plugin (CPU kernels)
  libdnnl-dev
  # mpi plugin (CPU collectives) and its launcher
  libopenmpi-dev openmpi-bin
  # data sets for the example training runs: images, and the text of the
  # fortune cookies for the byte-level GPT (examples/gpt_fortunes.toml)
  dataset-fashion-mnist fortunes
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  if [[ "$status" != "installed" ]]; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install-deps: not root and sudo is not installed; install as root: apt-get install ${missing[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when apt has none yet or an install fails
# because they are stale.
apt_install() {
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}
if ! compgen -G "/var/lib/apt/lists/*_Packages" >/dev/null || ! apt_install; then
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
  apt_install
fi
echo "install-deps: done" >&2
