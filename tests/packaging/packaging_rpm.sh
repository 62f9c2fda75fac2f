#!/usr/bin/env bash
# packaging.rpm — the rpms install and run, in a scratch root (never the
# system):
#   1. metadata: versioned Requires on `tandem`, what `tandem` recommends
#      and suggests, the files the packages must hold;
#   2. rpm --root <scratch> -i --nodeps every rpm;
#   3. runs the installed <scratch>/usr/bin/tandem: --version, `plugins`
#      with --plugin-path <scratch>/usr/lib/<multiarch>/tandem/plugins (every
#      installed plugin must load from there), and the 20-step training of
#      tiny_synthetic.toml, as packaging.deb does, on the reference backend (and
#      onednn when its rpm is there).
#
# What this does not verify: dependency resolution (--nodeps: the scratch
# root has no rpm database of the system's libraries, and the Requires name
# Fedora/RHEL packages); the plugin directory compiled into the host
# (/usr/lib/<multiarch>/tandem/plugins, which outside a chroot is the
# system's: --plugin-path points into the scratch root instead; packaging.deb
# checks that directory); the libraries the programs link (Boost, oneDNN,
# Open MPI) come from this Debian system, since the rpms are built on Debian
# with its multiarch layout. The host links no library of its own, so no
# LD_LIBRARY_PATH is needed. Running as root (or passwordless sudo) is needed
# for rpm to set file owners; otherwise exits 77 (skipped). Exits 77 too when
# Tandem plugins are installed on the system: the host would see them first.
#
#   packaging_rpm.sh <source dir> <packages dir>
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

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

command -v rpm >/dev/null 2>&1 || fail "rpm not found (scripts/install-deps.sh installs it)"
if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  skip "needs root or passwordless sudo: rpm --root sets the owners of the files it installs"
fi
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
system_plugin_dir="/usr/lib/$multiarch/tandem/plugins"
if compgen -G "$system_plugin_dir/libtandem-*.so" >/dev/null; then
  skip "Tandem plugins are installed in $system_plugin_dir; the host would load those, not the scratch root's"
fi

shopt -s nullglob
rpms=("$packages"/*.rpm)
shopt -u nullglob
((${#rpms[@]})) || fail "no .rpm in $packages (packaging.packages)"
declare -A rpm_of=()
for file in "${rpms[@]}"; do rpm_of[$(rpm -qp --qf '%{NAME}' "$file" 2>/dev/null)]=$file; done
for p in tandem tandem-devel; do [[ -n "${rpm_of[$p]:-}" ]] || fail "no $p rpm in $packages"; done

scratch=$(mktemp -d)
chmod 755 "$scratch"  # the host refuses plugins under a directory others may write
cleanup() {
  local rc=$?
  "${as_root[@]}" rm -rf "$scratch"
  exit "$rc"
}
trap cleanup EXIT
started=$SECONDS

# ---- 1. metadata ---------------------------------------------------------------
step "package metadata"
evr=$(rpm -qp --qf '%{VERSION}-%{RELEASE}' "${rpm_of[tandem]}" 2>/dev/null)
for p in $(printf '%s\n' "${!rpm_of[@]}" | sort); do
  requires=$(rpm -qp --requires "${rpm_of[$p]}" 2>/dev/null)
  if [[ $p != tandem ]]; then
    grep -qx "tandem = $evr" <<<"$requires" || { echo "$requires"; fail "$p does not require tandem = $evr"; }
  fi
  [[ -n $(rpm -qp --changelog "${rpm_of[$p]}" 2>/dev/null) ]] || fail "$p has no %changelog"
done
recommends=$(rpm -qp --recommends "${rpm_of[tandem]}" 2>/dev/null)
suggests=$(rpm -qp --suggests "${rpm_of[tandem]}" 2>/dev/null)
echo "   tandem Recommends: $(paste -sd' ' <<<"$recommends")"
echo "   tandem Suggests: $(paste -sd' ' <<<"$suggests")"
for p in onednn amp checkpointing grad-accum quantize; do
  [[ -z "${rpm_of[tandem-plugin-$p]:-}" ]] || grep -qx "tandem-plugin-$p" <<<"$recommends" ||
    fail "tandem does not recommend tandem-plugin-$p"
done
for p in cuda nccl mpi; do
  [[ -z "${rpm_of[tandem-plugin-$p]:-}" ]] || grep -qx "tandem-plugin-$p" <<<"$suggests" ||
    fail "tandem does not suggest tandem-plugin-$p"
done
files=$(rpm -qpl "${rpm_of[tandem]}" 2>/dev/null)
for file in /usr/bin/tandem "$system_plugin_dir/libtandem-reference.so" /usr/share/man/man1/tandem.1.gz; do
  grep -qx "$file" <<<"$files" || fail "the tandem rpm does not hold $file"
done
files=$(rpm -qpl "${rpm_of[tandem-devel]}" 2>/dev/null)
for file in /usr/bin/tandem-conformance /usr/share/man/man1/tandem-conformance.1.gz; do
  grep -qx "$file" <<<"$files" || fail "the tandem-devel rpm does not hold $file"
done

# ---- 2. install ------------------------------------------------------------------
step "rpm --root $scratch -i --nodeps (${#rpms[@]} rpms)"
# (Debian's rpm says on stderr that it is not Debian's package manager.)
"${as_root[@]}" rpm --root "$scratch" -i --nodeps "${rpms[@]}" 2> >(grep -v "Alien\|know what you are doing" >&2) ||
  fail "rpm -i"
installed=$("${as_root[@]}" rpm --root "$scratch" -qa 2>/dev/null | sort)
sed 's/^/   /' <<<"$installed"
(($(wc -l <<<"$installed") == ${#rpms[@]})) || fail "rpm --root -qa lists $(wc -l <<<"$installed") packages, not ${#rpms[@]}"

# ---- 3. run from the scratch root ----------------------------------------------------
tandem="$scratch/usr/bin/tandem"
plugins="$scratch$system_plugin_dir"
[[ -x "$tandem" ]] || fail "no $tandem"
unset TANDEM_PLUGIN_PATH
step "$tandem --version"
"$tandem" --version || fail "tandem --version"

step "tandem plugins --plugin-path $plugins"
out=$("$tandem" plugins --plugin-path "$plugins" 2>&1) || { echo "$out" >&2; fail "tandem plugins exited non-zero"; }
echo "$out"
count=0
for file in "$plugins"/libtandem-*.so; do
  name=${file##*/libtandem-}
  name=${name%.so}
  grep -q "^$name .*$file$" <<<"$out" || fail "the scratch root's tandem does not list '$name' from $file"
  count=$((count + 1))
done
((count > 0)) || fail "no plugin in $plugins"

work="$scratch/work"
mkdir -p "$work"
cp "$here/tiny_synthetic.toml" "$work/tiny.toml"
devices=(reference:0)
[[ -f "$plugins/libtandem-onednn.so" ]] && devices+=(onednn:0)
for device in "${devices[@]}"; do
  step "tandem train tiny.toml --device $device (20 steps, synthetic data)"
  run_dir="$work/run-${device%%:*}"
  out=$(cd "$work" && "$tandem" --plugin-path "$plugins" train tiny.toml --device "$device" --run-dir "$run_dir" 2>&1) ||
    { echo "$out" >&2; fail "training on $device"; }
  tail -n 2 <<<"$out"
  grep -q "trained 20 steps" <<<"$out" || fail "training on $device did not run 20 steps"
  [[ -s "$run_dir/metrics.jsonl" ]] || fail "no $run_dir/metrics.jsonl"
done

echo "packaging.rpm: OK in $((SECONDS - started)) s"
