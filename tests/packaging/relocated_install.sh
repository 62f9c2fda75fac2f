#!/usr/bin/env bash
# packaging.relocated_install — an installation moved elsewhere finds its own
# plugins: `cmake --install` of this build into a fresh prefix, then that
# prefix's `tandem plugins` lists every plugin installed there, each from
# the prefix, with no plugin path given (they are found beside the program).
#
#   relocated_install.sh <build dir>
set -euo pipefail

build=${1:?build dir}
prefix=$(mktemp -d "${TMPDIR:-/tmp}/tandem-relocated.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

cmake --install "$build" --prefix "$prefix" > "$prefix.log" 2>&1 || { cat "$prefix.log"; fail "cmake --install"; }
rm -f "$prefix.log"
mapfile -t plugins < <(find "$prefix" -name 'libtandem-*.so' | sort)
((${#plugins[@]} > 0)) || fail "nothing named libtandem-*.so was installed under $prefix"
listing=$(env -u TANDEM_PLUGIN_PATH "$prefix/bin/tandem" plugins 2>&1) || fail "tandem plugins: $listing"
for file in "${plugins[@]}"; do
  name=$(basename "$file" .so)
  name=${name#libtandem-}
  grep -qE "^$name +.* $file\$" <<< "$listing" || fail "'$name' is not listed from $file:
$listing"
done
echo "the installation moved to $prefix lists its ${#plugins[@]} plugins"
