#!/usr/bin/env bash
# Regenerates the SDK ABI baseline sdk/abi/tandem-abi-<major>.<minor>.xml from
# the current headers (the version is read from sdk/include/tandem/version.h).
#
# Run it deliberately, when releasing an ABI version: the sdk.abi test
# compares every build with the newest baseline of the current major, so a
# new baseline is a promise to every plugin built against it. A new ABI
# minor (fields appended) writes a new file next to the old ones; never
# rewrite an existing baseline to make a break pass — a break needs a new
# ABI major. Every bump needs an entry in sdk/CHANGELOG.md.
#
#   scripts/update-abi-baseline.sh [--force]   (--force: overwrite an existing file)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

force=0
[[ "${1:-}" == "--force" ]] && force=1

major=$(sed -n 's/^#define TDM_ABI_MAJOR \([0-9]*\).*/\1/p' sdk/include/tandem/version.h)
minor=$(sed -n 's/^#define TDM_ABI_MINOR \([0-9]*\).*/\1/p' sdk/include/tandem/version.h)
out="sdk/abi/tandem-abi-$major.$minor.xml"

if [[ -e "$out" && $force -eq 0 ]]; then
  echo "$out exists: ABI $major.$minor is released. Bump TDM_ABI_MINOR (appending) or TDM_ABI_MAJOR" >&2
  echo "(breaking) in version.h first, or pass --force if you really mean to rewrite it." >&2
  exit 1
fi
if ! grep -q "ABI $major\.$minor" sdk/CHANGELOG.md 2>/dev/null; then
  echo "warning: sdk/CHANGELOG.md has no 'ABI $major.$minor' entry; add one." >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Same flags as the tandem_abi_probe target in tests/sdk/CMakeLists.txt.
"${CC:-cc}" -std=c99 -pedantic -Wall -Wextra -g -O0 -fPIC -fvisibility=hidden -shared \
  -Wl,-soname,libtandem_abi_probe.so -Isdk/include tests/sdk/abi/abi_probe.c -o "$work/libtandem_abi_probe.so"
mkdir -p sdk/abi
abidw --no-corpus-path --no-comp-dir-path --short-locs --out-file "$out" "$work/libtandem_abi_probe.so"
echo "wrote $out; commit it together with the version.h bump and the CHANGELOG entry."
