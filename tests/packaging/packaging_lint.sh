#!/usr/bin/env bash
# packaging.lint — the packages pass Debian's and Fedora's package linters:
#   lintian on every .deb: fails on any error or warning (info and pedantic
#     tags are printed, not counted), except initial-upload-closes-no-bugs:
#     the first entry of a package uploaded to Debian must close its ITP
#     bug, and these packages are no upload to Debian;
#   rpmlint on every .rpm, with packaging/rpmlint.toml (its valid licenses
#     and the two filters it explains): fails on any error.
# Exits 77 (skipped) when lintian or rpmlint is not installed
# (scripts/install-deps.sh installs both).
#
#   packaging_lint.sh <source dir> <packages dir>
set -euo pipefail

source=$(cd "${1:?source dir}" && pwd)
packages=${2:?packages dir}

missing=()
for tool in lintian rpmlint; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  echo "SKIPPED: ${missing[*]} not installed (scripts/install-deps.sh installs them: apt-get install ${missing[*]})"
  exit 77
fi
shopt -s nullglob
debs=("$packages"/*.deb)
rpms=("$packages"/*.rpm)
((${#debs[@]} && ${#rpms[@]})) || { echo "FAILED: no packages in $packages (packaging.packages)" >&2; exit 1; }

failed=0
echo "== lintian --pedantic --display-info (fails on errors and warnings) on ${#debs[@]} debs"
# --allow-root: lintian only reads the packages; it warns when run as root.
# --no-cfg: no user or site lintianrc changes the verdict.
if ! lintian --no-cfg --allow-root --pedantic --display-info --fail-on error,warning \
  --suppress-tags initial-upload-closes-no-bugs "${debs[@]}"; then
  echo "FAILED: lintian reports errors or warnings (E: and W: above)" >&2
  failed=1
fi

echo "== rpmlint -c packaging/rpmlint.toml (fails on errors) on ${#rpms[@]} rpms"
# rpmlint exits non-zero on errors (64) or when the badness threshold is
# passed (66); warnings alone exit 0.
if ! rpmlint -c "$source/packaging/rpmlint.toml" "${rpms[@]}"; then
  echo "FAILED: rpmlint reports errors (E: above)" >&2
  failed=1
fi
exit "$failed"
