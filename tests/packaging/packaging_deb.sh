#!/usr/bin/env bash
# packaging.deb — the debs work on a real system, from their installed files:
#   1. metadata: versioned dependencies on `tandem`, what `tandem` recommends
#      and suggests, the files every package must hold;
#   2. dpkg -i every deb (packaging.packages built them). A deb whose vendor
#      libraries this machine lacks (no CUDA runtime from NVIDIA's repository
#      here: tandem-plugin-cuda, -nccl) is installed with --force-depends,
#      after the others were installed strictly, and the test says so;
#   3. /usr/bin/tandem --version, `tandem plugins` lists every installed
#      plugin from /usr/lib/<multiarch>/tandem/plugins, the manual pages are
#      there, and the tiny synthetic model of tiny_synthetic.toml trains 20
#      steps on the reference backend (and on onednn when its deb is there);
#   4. builds sdk/examples/hello_backend out of tree against the installed
#      tandem-dev, loads it with --plugin-path, runs tandem-conformance on it;
#   5. dpkg --purge every package and checks nothing of them is left.
#
# It installs into the real system, so it runs only when
# TANDEM_TEST_SYSTEM_INSTALL is ON (default: ON when CI=true or when run as
# root, OFF otherwise) and it can act as root (root or passwordless sudo);
# otherwise it exits 77 (skipped). It refuses to touch an already installed
# Tandem package.
#
#   packaging_deb.sh <source dir> <packages dir>
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

source=$(cd "${1:?source dir}" && pwd)
packages=$(cd "${2:?packages dir}" && pwd)

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
for tool in dpkg dpkg-deb dpkg-query cmake; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool not found (scripts/install-deps.sh installs it)"
done

shopt -s nullglob
debs=("$packages"/*.deb)
shopt -u nullglob
((${#debs[@]})) || fail "no .deb in $packages (packaging.packages)"
declare -A deb_of=()
for deb in "${debs[@]}"; do deb_of[$(dpkg-deb --field "$deb" Package)]=$deb; done
for p in tandem tandem-dev; do [[ -n "${deb_of[$p]:-}" ]] || fail "no $p deb in $packages"; done
for p in "${!deb_of[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  if [[ -n "$status" && "$status" != not-installed ]]; then
    skip "package $p is on this system ($status); not replacing it (dpkg --purge $p to run this test)"
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

# ---- 1. metadata -------------------------------------------------------------
step "package metadata"
version=$(dpkg-deb --field "${deb_of[tandem]}" Version)
for p in $(printf '%s\n' "${!deb_of[@]}" | sort); do
  printf '   %-28s %s\n' "$p" "$(dpkg-deb --field "${deb_of[$p]}" Depends)"
  if [[ $p != tandem ]]; then
    [[ $(dpkg-deb --field "${deb_of[$p]}" Depends) == *"tandem (= $version)"* ]] ||
      fail "$p does not depend on tandem (= $version)"
  fi
  contents=$(dpkg-deb --contents "${deb_of[$p]}")  # (not piped into grep -q: pipefail + SIGPIPE)
  for doc in copyright changelog.Debian.gz; do
    grep -q "\./usr/share/doc/$p/$doc$" <<<"$contents" || fail "$p lacks /usr/share/doc/$p/$doc"
  done
done
recommends=$(dpkg-deb --field "${deb_of[tandem]}" Recommends)
suggests=$(dpkg-deb --field "${deb_of[tandem]}" Suggests)
echo "   tandem Recommends: $recommends"
echo "   tandem Suggests: $suggests"
for p in onednn amp checkpointing grad-accum quantize; do
  if [[ -n "${deb_of[tandem-plugin-$p]:-}" ]]; then
    [[ ", $recommends," == *", tandem-plugin-$p,"* ]] || fail "tandem does not recommend tandem-plugin-$p"
  fi
done
for p in cuda nccl mpi; do
  if [[ -n "${deb_of[tandem-plugin-$p]:-}" ]]; then
    [[ ", $suggests," == *", tandem-plugin-$p,"* ]] || fail "tandem does not suggest tandem-plugin-$p"
  fi
done
contents=$(dpkg-deb --contents "${deb_of[tandem]}")
for file in usr/bin/tandem "${plugin_dir#/}/libtandem-reference.so" usr/share/man/man1/tandem.1.gz; do
  grep -q "\./$file$" <<<"$contents" || fail "tandem lacks /$file"
done
dev_contents=$(dpkg-deb --contents "${deb_of[tandem-dev]}")
for file in usr/share/doc/tandem-dev/ABI.md usr/share/doc/tandem-dev/ops.md \
  usr/share/doc/tandem-dev/changelog.gz usr/bin/tandem-conformance usr/share/man/man1/tandem-conformance.1.gz \
  usr/share/doc/tandem-dev/examples/hello_backend/hello.cpp usr/share/doc/tandem-dev/examples/ema_feature/ema.cpp \
  usr/share/doc/tandem-dev/examples/tcp_comm/tcp_comm.cpp; do
  grep -q "\./$file$" <<<"$dev_contents" || fail "tandem-dev lacks /$file"
done

# ---- 2. install every deb --------------------------------------------------------
# A dependency is met when one of its alternatives is installed here or is
# one of these packages (versions are left to dpkg).
unmet_of() {
  local deb=$1 group alt name met groups alts missing=()
  IFS=',' read -ra groups <<<"$(dpkg-deb --field "$deb" Depends)"
  for group in "${groups[@]}"; do
    met=0
    IFS='|' read -ra alts <<<"$group"
    for alt in "${alts[@]}"; do
      name=$(awk '{ print $1 }' <<<"$alt")
      if [[ -n "${deb_of[$name]:-}" || $(dpkg-query -W -f='${db:Status-Status}' "$name" 2>/dev/null || true) == installed ]]; then
        met=1
      fi
    done
    ((met)) || missing+=("$(xargs <<<"$group")")  # (xargs: trimmed)
  done
  local IFS=,
  echo "${missing[*]}"
}
strict=()
forced=()
for p in $(printf '%s\n' "${!deb_of[@]}" | sort); do
  unmet=$(unmet_of "${deb_of[$p]}")
  if [[ -z "$unmet" ]]; then
    strict+=("$p")
  else
    echo "   $p: not installed here: $unmet -> dpkg --force-depends"
    forced+=("$p")
  fi
done
[[ " ${strict[*]} " == *" tandem "* && " ${strict[*]} " == *" tandem-dev "* ]] ||
  fail "tandem or tandem-dev has dependencies this system lacks (scripts/install-deps.sh)"
step "dpkg -i ${strict[*]}"
installed=("${strict[@]}" "${forced[@]}")
files=()
for p in "${strict[@]}"; do files+=("${deb_of[$p]}"); done
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive dpkg -i "${files[@]}" ||
  fail "dpkg -i (missing dependencies? run scripts/install-deps.sh)"
if ((${#forced[@]})); then
  step "dpkg -i --force-depends ${forced[*]}"
  files=()
  for p in "${forced[@]}"; do files+=("${deb_of[$p]}"); done
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive dpkg -i --force-depends "${files[@]}" ||
    fail "dpkg -i --force-depends"
fi
for p in "${installed[@]}"; do
  [[ $(dpkg-query -W -f='${db:Status-Status}' "$p") == installed ]] || fail "$p is not installed after dpkg -i"
done

# ---- 3. run what was installed -------------------------------------------------
unset TANDEM_PLUGIN_PATH
[[ -x /usr/bin/tandem ]] || fail "/usr/bin/tandem not installed"
step "/usr/bin/tandem --version"
/usr/bin/tandem --version || fail "tandem --version exited non-zero"
grep -q "^commit " <(/usr/bin/tandem --version) || fail "tandem --version prints no commit line"

step "/usr/bin/tandem plugins"
out=$(/usr/bin/tandem plugins 2>&1) || { echo "$out" >&2; fail "tandem plugins exited non-zero"; }
echo "$out"
for file in "$plugin_dir"/libtandem-*.so; do
  name=${file##*/libtandem-}
  name=${name%.so}
  grep -q "^$name .*$file$" <<<"$out" || fail "the installed tandem does not list '$name' from $file"
done
out_v=$(/usr/bin/tandem plugins -v 2>&1) || { echo "$out_v" >&2; fail "tandem plugins -v exited non-zero"; }
grep -q "$plugin_dir" <<<"$out_v" || { echo "$out_v"; fail "tandem plugins -v does not show $plugin_dir"; }

step "manual pages"
for page in tandem tandem-conformance; do
  [[ -f /usr/share/man/man1/$page.1.gz ]] || fail "no /usr/share/man/man1/$page.1.gz"
  if command -v man >/dev/null 2>&1; then
    text=$(MANWIDTH=80 man -l /usr/share/man/man1/$page.1.gz 2>&1) || fail "man -l $page.1.gz"
    grep -q "^SYNOPSIS" <<<"$text" || { echo "$text"; fail "$page(1) has no SYNOPSIS"; }
  fi
done

cp "$here/tiny_synthetic.toml" "$work/tiny.toml"
devices=(reference:0)
[[ -f "$plugin_dir/libtandem-onednn.so" ]] && devices+=(onednn:0)
for device in "${devices[@]}"; do
  step "/usr/bin/tandem train tiny.toml --device $device (20 steps, synthetic data)"
  run_dir="$work/run-${device%%:*}"
  out=$(cd "$work" && /usr/bin/tandem train tiny.toml --device "$device" --run-dir "$run_dir" 2>&1) ||
    { echo "$out" >&2; fail "training on $device"; }
  tail -n 2 <<<"$out"
  grep -q "trained 20 steps" <<<"$out" || fail "training on $device did not run 20 steps"
  [[ -s "$run_dir/metrics.jsonl" ]] || fail "no $run_dir/metrics.jsonl"
done

# ---- 4. out-of-tree plugin against the installed SDK -----------------------------
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
grep -qw hello <<<"$out" || { echo "$out"; fail "the installed tandem does not load 'hello'"; }

step "tandem-conformance --plugin libtandem-hello.so (what it implements must pass)"
# Exit 0 = no case failed; declined cases (other ops, dtypes, broadcasts) are UNSUPPORTED.
conf=$(/usr/bin/tandem-conformance --plugin "$hello" --verbose 2>&1) || { echo "$conf" >&2; fail "tandem-conformance on hello"; }
tail -n 2 <<<"$conf"
for op in fill copy add; do
  grep -q "^PASS $op f32" <<<"$conf" || { echo "$conf" >&2; fail "no passing f32 case of '$op'"; }
done

step "build the installed examples/ema_feature against the installed tandem-dev"
env -u CMAKE_PREFIX_PATH -u TandemSDK_DIR -u TandemSDK_ROOT \
  cmake -S /usr/share/doc/tandem-dev/examples/ema_feature -B "$work/ema" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$work/ema-configure.log" 2>&1 ||
  { cat "$work/ema-configure.log" >&2; fail "configure ema_feature"; }
cmake --build "$work/ema" >"$work/ema-build.log" 2>&1 || { cat "$work/ema-build.log" >&2; fail "build ema_feature"; }
ema_run="$work/ema-run"
out=$(/usr/bin/tandem train "$source/tests/packaging/tiny_synthetic.toml" --run-dir "$ema_run" \
  --plugin-path "$work/ema" --feature ema:decay=0.9 2>&1) || { echo "$out" >&2; fail "tandem train with the ema example"; }
[[ -s "$ema_run/ema.safetensors" ]] || fail "the ema example wrote no $ema_run/ema.safetensors"
out=$(/usr/bin/tandem eval "$source/tests/packaging/tiny_synthetic.toml" --weights "$ema_run/ema.safetensors" 2>&1) ||
  { echo "$out" >&2; fail "tandem eval --weights ema.safetensors"; }

step "build the installed examples/tcp_comm and run the conformance kit on it (2 processes)"
env -u CMAKE_PREFIX_PATH -u TandemSDK_DIR -u TandemSDK_ROOT \
  cmake -S /usr/share/doc/tandem-dev/examples/tcp_comm -B "$work/tcp" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$work/tcp-configure.log" 2>&1 ||
  { cat "$work/tcp-configure.log" >&2; fail "configure tcp_comm"; }
cmake --build "$work/tcp" >"$work/tcp-build.log" 2>&1 || { cat "$work/tcp-build.log" >&2; fail "build tcp_comm"; }
conf=$(/usr/bin/tandem-conformance --plugin "$work/tcp/libtandem-tcp.so" --ranks 2 --timeout 1 2>&1) ||
  { echo "$conf" >&2; fail "tandem-conformance on the tcp example"; }
tail -n 2 <<<"$conf"

# ---- 5. removal ------------------------------------------------------------------
step "dpkg --purge ${installed[*]}"
"${as_root[@]}" dpkg --purge "${installed[@]}"
installed=()
[[ ! -e /usr/bin/tandem ]] || fail "/usr/bin/tandem still present after dpkg --purge"
left=$(find "$plugin_dir" /usr/share/doc/tandem /usr/share/man/man1/tandem.1.gz 2>/dev/null || true)
[[ -z "$left" ]] || fail "left after dpkg --purge: $left"

echo "packaging.deb: OK in $((SECONDS - started)) s"
