#!/usr/bin/env bash
# packaging.deb — the packages work on a real system:
#   1. builds the deb and rpm packages (reusing the test build when it was
#      configured with CMAKE_INSTALL_PREFIX=/usr, else scripts/package.sh in a
#      build directory of its own);
#   2. dpkg -i tandem + tandem-dev, runs /usr/bin/tandem plugins and checks
#      `reference` loads from /usr/lib/<multiarch>/tandem/plugins;
#   3. builds sdk/examples/hello_backend out of tree against the installed
#      tandem-dev, loads it with --plugin-path, runs tandem-conformance on it;
#   4. dpkg -r both and checks /usr/bin/tandem is gone;
#   5. rpm -qpl: the rpm holds /usr/bin/tandem.
#
# It installs into the real system, so it runs only when
# TANDEM_TEST_SYSTEM_INSTALL is ON (default: ON when CI=true or when run as
# root, OFF otherwise) and it can act as root (root or passwordless sudo);
# otherwise it exits 77 (skipped). It refuses to touch an already installed
# `tandem` package.
#
#   packaging_deb.sh <source dir> <test build dir> <its CMAKE_INSTALL_PREFIX>
set -euo pipefail

source=$(cd "${1:?source dir}" && pwd)
test_build=${2:?build dir}
test_prefix=${3:?install prefix of the build dir}

skip() {
  echo "SKIPPED: $*"
  exit 77
}
step() { echo "== $*"; }
fail() {
  echo "FAILED: $*" >&2
  exit 1
}

# ---- may we touch the system? ----------------------------------------------
default_install=OFF
if [[ "${CI:-}" == "true" || $(id -u) -eq 0 ]]; then default_install=ON; fi
case "${TANDEM_TEST_SYSTEM_INSTALL:-$default_install}" in
  ON | on | 1 | TRUE | true | YES | yes) ;;
  *) skip "system install disabled (TANDEM_TEST_SYSTEM_INSTALL=${TANDEM_TEST_SYSTEM_INSTALL:-$default_install}); set it to ON to run this test" ;;
esac
if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  skip "needs root or passwordless sudo to dpkg -i the packages"
fi
for tool in dpkg dpkg-deb rpm cmake nm; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool not found (scripts/install-deps.sh installs it)"
done
for p in tandem tandem-dev; do
  if [[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true) == installed ]]; then
    skip "package $p is already installed on this system; not replacing it (dpkg -r $p to run this test)"
  fi
done

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
plugin_dir="/usr/lib/$multiarch/tandem/plugins"
work=$(mktemp -d)
installed=()
cleanup() {
  local rc=$?
  if ((${#installed[@]})); then
    echo "== cleanup: dpkg --purge ${installed[*]}"
    "${as_root[@]}" dpkg --purge "${installed[@]}" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
started=$SECONDS

# ---- 1. packages -------------------------------------------------------------
packages="$work/packages"
if [[ "$test_prefix" == "/usr" ]]; then
  step "cpack in the test build ($test_build, prefix /usr)"
  (cd "$test_build" && cpack -G "DEB;RPM" -B "$packages") >"$work/cpack.log" 2>&1 ||
    { cat "$work/cpack.log" >&2; fail "cpack"; }
else
  # The test build installs to $test_prefix; packages need /usr, so build
  # host and plugins once more (no tests) in a directory of their own.
  build="$test_build/packaging-build"
  step "scripts/package.sh $build (test build prefix is $test_prefix, not /usr)"
  "$source/scripts/package.sh" "$build" >"$work/package.log" 2>&1 ||
    { tail -n 60 "$work/package.log" >&2; fail "scripts/package.sh"; }
  mkdir -p "$packages"
  cp "$build"/packages/*.deb "$build"/packages/*.rpm "$packages"/
fi
echo "   built in $((SECONDS - started)) s:"
(cd "$packages" && ls -1 ./*.deb ./*.rpm)
shopt -s nullglob
runtime_deb=("$packages"/tandem_*.deb)
dev_deb=("$packages"/tandem-dev_*.deb)
runtime_rpm=("$packages"/tandem-[0-9]*.rpm)
shopt -u nullglob
((${#runtime_deb[@]} == 1)) || fail "expected one tandem_*.deb in $packages"
((${#dev_deb[@]} == 1)) || fail "expected one tandem-dev_*.deb in $packages"
((${#runtime_rpm[@]} == 1)) || fail "expected one tandem-<version>*.rpm in $packages"

step "package metadata"
dpkg-deb --field "${runtime_deb[0]}" Package Version Depends
dpkg-deb --field "${dev_deb[0]}" Package Depends
[[ $(dpkg-deb --field "${dev_deb[0]}" Depends) == *"tandem (= "* ]] || fail "tandem-dev does not depend on tandem"
contents=$(dpkg-deb --contents "${runtime_deb[0]}")  # (not piped into grep -q: pipefail + SIGPIPE)
grep -q "\./usr/bin/tandem$" <<<"$contents" || fail "tandem deb lacks /usr/bin/tandem"
grep -q "\.$plugin_dir/libtandem-reference.so$" <<<"$contents" ||
  fail "tandem deb lacks $plugin_dir/libtandem-reference.so"
dev_contents=$(dpkg-deb --contents "${dev_deb[0]}")
for doc in ABI.md ops.md CHANGELOG.md; do
  grep -q "\./usr/share/doc/tandem-dev/$doc$" <<<"$dev_contents" ||
    fail "tandem-dev deb lacks /usr/share/doc/tandem-dev/$doc"
done

# ---- 2. install and run --------------------------------------------------------
step "dpkg -i tandem tandem-dev"
installed=(tandem-dev tandem)
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive dpkg -i "${runtime_deb[0]}" "${dev_deb[0]}" ||
  fail "dpkg -i (missing dependencies? run scripts/install-deps.sh)"
[[ -x /usr/bin/tandem ]] || fail "/usr/bin/tandem not installed"

step "/usr/bin/tandem plugins"
unset TANDEM_PLUGIN_PATH
out=$(/usr/bin/tandem plugins 2>&1) || { echo "$out" >&2; fail "tandem plugins exited non-zero"; }
echo "$out"
grep -qw reference <<<"$out" || fail "installed tandem does not list 'reference'"
out_v=$(/usr/bin/tandem plugins -v 2>&1) || { echo "$out_v" >&2; fail "tandem plugins -v exited non-zero"; }
grep -q "$plugin_dir" <<<"$out_v" || { echo "$out_v"; fail "tandem plugins -v does not show $plugin_dir"; }

# ---- 3. out-of-tree plugin against the installed SDK -----------------------------
step "build sdk/examples/hello_backend against the installed tandem-dev"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
env -u CMAKE_PREFIX_PATH -u TandemSDK_DIR -u TandemSDK_ROOT \
  cmake -S "$source/sdk/examples/hello_backend" -B "$work/hello" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$work/hello-configure.log" 2>&1 ||
  { cat "$work/hello-configure.log" >&2; fail "configure hello_backend"; }
found=$(sed -n 's/^TandemSDK_DIR:PATH=//p' "$work/hello/CMakeCache.txt")
echo "   TandemSDK_DIR=$found"
[[ "$found" == /usr/lib/"$multiarch"/cmake/TandemSDK || "$found" == /lib/"$multiarch"/cmake/TandemSDK ]] ||
  fail "TandemSDK was found at '$found', not in the installed package"
cmake --build "$work/hello" >"$work/hello-build.log" 2>&1 || { cat "$work/hello-build.log" >&2; fail "build hello_backend"; }
hello="$work/hello/libtandem-hello.so"
[[ -f "$hello" ]] || fail "no $hello"

step "tandem plugins --plugin-path $work/hello"
out=$(/usr/bin/tandem plugins --plugin-path "$work/hello" 2>&1) || { echo "$out" >&2; fail "tandem plugins --plugin-path"; }
echo "$out"
grep -qw hello <<<"$out" || fail "the installed tandem does not load 'hello'"

if [[ -x /usr/bin/tandem-conformance ]]; then
  step "tandem-conformance --plugin libtandem-hello.so (what it implements must pass)"
  # Exit 0 = no case failed; declined cases (other ops, dtypes, broadcasts) are UNSUPPORTED.
  conf=$(/usr/bin/tandem-conformance --plugin "$hello" 2>&1) || { echo "$conf" >&2; fail "tandem-conformance on hello"; }
  tail -n 2 <<<"$conf"
  for op in fill copy add; do
    grep -q "^PASS $op f32" <<<"$conf" || { echo "$conf" >&2; fail "no passing f32 case of '$op'"; }
  done
else
  echo "   (no /usr/bin/tandem-conformance in tandem-dev: conformance run left out)"
fi

# ---- 4. removal ------------------------------------------------------------------
step "dpkg -r tandem-dev tandem"
"${as_root[@]}" dpkg -r tandem-dev tandem
installed=()
[[ ! -e /usr/bin/tandem ]] || fail "/usr/bin/tandem still present after dpkg -r"
[[ ! -e "$plugin_dir/libtandem-reference.so" ]] || fail "reference plugin still present after dpkg -r"

# ---- 5. rpm ----------------------------------------------------------------------
step "rpm -qpl ${runtime_rpm[0]##*/}"
rpm_files=$(rpm -qpl "${runtime_rpm[0]}" 2>/dev/null)
echo "$rpm_files"
grep -qx /usr/bin/tandem <<<"$rpm_files" || fail "the rpm does not hold /usr/bin/tandem"
grep -qx "$plugin_dir/libtandem-reference.so" <<<"$rpm_files" || fail "the rpm does not hold the reference plugin"

echo "packaging.deb: OK in $((SECONDS - started)) s"
