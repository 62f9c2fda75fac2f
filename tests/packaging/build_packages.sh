#!/usr/bin/env bash
# packaging.packages — builds the deb and rpm packages once, into <out dir>,
# for packaging.lint, packaging.deb and packaging.rpm (a ctest fixture):
# cpack in the test build when it was configured with
# CMAKE_INSTALL_PREFIX=/usr (the `ci` preset), else scripts/package.sh in a
# build directory of its own (a second compile of host and plugins: the
# host compiles its plugin directory in, so packages need /usr).
#
#   build_packages.sh <source dir> <test build dir> <its CMAKE_INSTALL_PREFIX> <out dir>
set -euo pipefail

source=$(cd "${1:?source dir}" && pwd)
test_build=${2:?build dir}
test_prefix=${3:?install prefix of the build dir}
out=${4:?output dir}

fail() {
  echo "FAILED: $*" >&2
  exit 1
}
for tool in cpack dpkg-deb rpmbuild; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool not found (scripts/install-deps.sh installs it)"
done

started=$SECONDS
rm -rf "$out"
mkdir -p "$out"
if [[ "$test_prefix" == "/usr" ]]; then
  echo "== cpack in the test build ($test_build, prefix /usr)"
  (cd "$test_build" && cpack -G "DEB;RPM" -B "$out") >"$out/cpack.log" 2>&1 ||
    { cat "$out/cpack.log" >&2; fail "cpack"; }
else
  build="$test_build/packaging-build"
  echo "== scripts/package.sh $build (test build prefix is $test_prefix, not /usr)"
  "$source/scripts/package.sh" "$build" >"$out/package.log" 2>&1 ||
    { tail -n 60 "$out/package.log" >&2; fail "scripts/package.sh"; }
  cp "$build"/packages/*.deb "$build"/packages/*.rpm "$out"/
fi
# CPack's staging trees: only the packages matter.
rm -rf "$out/_CPack_Packages"
shopt -s nullglob
debs=("$out"/*.deb)
rpms=("$out"/*.rpm)
((${#debs[@]} > 0)) || fail "no .deb in $out"
((${#rpms[@]} == ${#debs[@]})) || fail "${#debs[@]} debs but ${#rpms[@]} rpms in $out"
echo "   built in $((SECONDS - started)) s into $out:"
(cd "$out" && ls -1 ./*.deb ./*.rpm)
