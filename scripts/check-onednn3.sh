#!/usr/bin/env bash
# Builds the onednn plugin against oneDNN 3 and runs the conformance suite
# on it, so that the plugin keeps building and computing right on the
# distributions that ship oneDNN 3 (Debian 13: 3.7) while this
# machine has Debian 12's oneDNN 2.6.
#
#   scripts/check-onednn3.sh BUILD_DIR
#
# BUILD_DIR is a build of this tree with `tandem-conformance`, `tandem` and the
# reference plugin in it (ctest's onednn3.conformance passes its own).
#
# 1. Downloads Debian 13's libdnnl-dev and libdnnl3.x with apt (signatures
#    checked against Debian's archive keyring), and the C and C++ runtime that
#    library was built against (libc6, libstdc++6, libgcc-s1, libgomp1): they
#    are unpacked under $TANDEM_ONEDNN3_CACHE (default
#    ~/.cache/tandem/onednn3), never installed into the system.
# 2. Configures BUILD_DIR/onednn3 against those headers and builds only the
#    onednn plugin (warnings are errors).
# 3. Runs BUILD_DIR's conformance driver on that plugin under Debian 13's
#    dynamic loader (its libdnnl needs a newer glibc than Debian 12's), at the
#    CPU's own ISA and with ONEDNN_MAX_CPU_ISA=AVX2, then trains the CNN example
#    for 60 steps on it.
#
# Exit 0: every case passed. 77: Debian's archive could not be reached
# (ctest reports the test skipped, with this script's reason). Other: failed.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: scripts/check-onednn3.sh BUILD_DIR" >&2
  exit 2
fi
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "$1" && pwd)
cache=${TANDEM_ONEDNN3_CACHE:-${XDG_CACHE_HOME:-${HOME:-$build}/.cache}/tandem/onednn3}
mirror=${TANDEM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=trixie
root=$cache/root
lib=$root/usr/lib/x86_64-linux-gnu

log() { echo "== check-onednn3: $*" >&2; }

for tool in "$build/bin/tandem-conformance" "$build/bin/tandem" "$build/lib/tandem/plugins/libtandem-reference.so"; do
  [ -e "$tool" ] || { echo "check-onednn3: $tool is missing: build $build first" >&2; exit 2; }
done

if "$build/bin/tandem" --plugin-path "$build/lib/tandem/plugins" plugins 2>/dev/null | grep -qE '^onednn .*oneDNN 3\.'; then
  echo "SKIPPED: $build's own onednn plugin is built against oneDNN 3 already (conformance.onednn checks it)" >&2
  exit 77
fi

# ---- 1. Debian 13's oneDNN, unpacked ------------------------------------------
if [ ! -e "$root/.complete" ]; then
  apt_dir=$cache/apt
  rm -rf "$apt_dir" "$root"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$apt_dir/debs" "$root"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" > "$apt_dir/sources.list"
  apt=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
       -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir" -o Dir::State::status=/dev/null
       -o APT::Sandbox::User=root -o Debug::NoLocking=1)
  log "fetching Debian $suite's package list from $mirror"
  if ! apt-get "${apt[@]}" -qq update >&2 2>"$apt_dir/update.log" || grep -q '^[WE]:' "$apt_dir/update.log"; then
    cat "$apt_dir/update.log" >&2
    echo "SKIPPED: Debian's archive ($mirror, $suite) could not be reached to fetch oneDNN 3" >&2
    exit 77
  fi
  runtime=$(apt-cache "${apt[@]}" depends libdnnl-dev | awk '/Depends: libdnnl[0-9]/ {print $2; exit}')
  [ -n "$runtime" ] || { echo "check-onednn3: Debian $suite's libdnnl-dev names no libdnnl runtime package" >&2; exit 1; }
  (cd "$apt_dir/debs" && apt-get "${apt[@]}" -qq download libdnnl-dev "$runtime" libc6 libstdc++6 libgcc-s1 libgomp1 >&2)
  for deb in "$apt_dir/debs"/*.deb; do dpkg-deb -x "$deb" "$root"; done
  touch "$root/.complete"
fi
header=$root/usr/include/oneapi/dnnl/dnnl_version.h
major=$(awk '/#define DNNL_VERSION_MAJOR/ {print $3}' "$header")
[ "$major" = 3 ] || { echo "check-onednn3: $header is oneDNN $major, not 3" >&2; exit 1; }

# ---- 2. The plugin against it -------------------------------------------------
out=$build/onednn3
log "building the onednn plugin against $(awk '/#define DNNL_VERSION_(MAJOR|MINOR|PATCH)/ {printf "%s%s", sep, $3; sep="."}' "$header") in $out"
cmake -S "$repo" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_TESTS=OFF \
  -DTANDEM_BUILD_CUDA=OFF -DTANDEM_WERROR=ON -DCMAKE_DISABLE_FIND_PACKAGE_dnnl=ON \
  -DTANDEM_DNNL_INCLUDE_DIR="$root/usr/include" -DTANDEM_DNNL_LIBRARY="$lib/libdnnl.so" >/dev/null
cmake --build "$out" --target tandem-plugin-onednn -j2 >&2
plugin=$out/lib/tandem/plugins/libtandem-onednn.so

# ---- 3. Conformance and a training run on it -----------------------------------
debian13() {
  "$lib/ld-linux-x86-64.so.2" --library-path "$lib:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" "$@"
}
debian13 "$build/bin/tandem" --plugin-path "$out/lib/tandem/plugins" plugins | grep -E '^onednn .*oneDNN 3\.' >&2 ||
  { echo "check-onednn3: $plugin does not report oneDNN 3 as its vendor library" >&2; exit 1; }
for isa in "" AVX2; do
  log "conformance on oneDNN 3${isa:+, ONEDNN_MAX_CPU_ISA=$isa}"
  (
    if [ -n "$isa" ]; then export ONEDNN_MAX_CPU_ISA=$isa; fi
    debian13 "$build/bin/tandem-conformance" --plugin "$plugin" \
      --reference "$build/lib/tandem/plugins/libtandem-reference.so" | grep -E "^[0-9]+ passed, " >&2
  )
done
log "training examples/fmnist_cnn.toml for 60 steps on oneDNN 3"
run_dir=$(mktemp -d)
trap 'rm -rf "$run_dir"' EXIT
debian13 "$build/bin/tandem" --plugin-path "$out/lib/tandem/plugins" train "$repo/examples/fmnist_cnn.toml" \
  --device onednn:0 --threads 2 --set train.steps=60 --run-dir "$run_dir/cnn" | tail -n 2 >&2
log "passed"
