#!/usr/bin/env bash
# packaging.kernels_at_o3 — the onednn plugin's kernels are compiled at -O3
# under the flags a distribution builds with, not only under our Release
# preset: Debian's debhelper configures build type None with
# dpkg-buildflags' -O2, Fedora's %cmake RelWithDebInfo (-O2). At -O2 GCC
# leaves the own GEMM's register block on the stack (a third of its speed).
# A Debug build keeps its -O0, and a configure that names no build type gets
# Release. Configures only (no build) and reads compile_commands.json.
#
#   kernels_at_o3.sh <source dir>
set -euo pipefail

. "$(dirname "$0")/scratch_configure.sh"
scratch_setup packaging.kernels_at_o3 "${1:?source dir}"

# Each case from an empty build directory: a cached build type must not
# carry over.
fresh_configure() {
  rm -rf "$work/build"
  configure "$@"
}
# The last -O option on the compile line of a source under plugins/ (GCC
# takes the last), or "none".
last_level() {
  python3 - "$work/build/compile_commands.json" "$1" <<'PY'
import json, shlex, sys
commands = [c for c in json.load(open(sys.argv[1])) if c["file"].endswith(sys.argv[2])]
assert commands, f"no compile command for {sys.argv[2]}"
levels = [a for a in shlex.split(commands[0]["command"]) if a.startswith("-O")]
print(levels[-1] if levels else "none")
PY
}
kernel=plugins/onednn/ops/sgemm_avx2.cpp

debian_flags=$(dpkg-buildflags --get CXXFLAGS 2>/dev/null || echo "-g -O2")
fresh_configure -DCMAKE_BUILD_TYPE=None "-DCMAKE_CXX_FLAGS=$debian_flags"
if ! grep -q "$kernel" "$work/build/compile_commands.json"; then
  echo "SKIPPED: the onednn plugin is not configured here (oneDNN's CMake package not found)"
  exit 77
fi
level=$(last_level "$kernel")
[[ "$level" == "-O3" ]] || fail "build type None with '$debian_flags': $kernel at $level, not -O3"
echo "None + '$debian_flags': $level"

fresh_configure -DCMAKE_BUILD_TYPE=RelWithDebInfo
level=$(last_level "$kernel")
[[ "$level" == "-O3" ]] || fail "RelWithDebInfo: $kernel at $level, not -O3"
echo "RelWithDebInfo: $level"

fresh_configure -DCMAKE_BUILD_TYPE=Debug
level=$(last_level "$kernel")
[[ "$level" != "-O3" ]] || fail "Debug: $kernel at -O3; a Debug build keeps its own level"
echo "Debug: $level"

fresh_configure
type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$work/build/CMakeCache.txt")
[[ "$type" == "Release" ]] || fail "no build type given: configured as '$type', not Release"
echo "no build type: Release"
