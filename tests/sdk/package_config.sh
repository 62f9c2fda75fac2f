#!/usr/bin/env bash
# sdk.package_config — the installed TandemSDK CMake package works for an
# out-of-tree plugin, without root: installs the `dev` component of this
# build into a temporary prefix, builds sdk/examples/hello_backend against
# it, checks the plugin exports only tdm_plugin_entry, installs it, and (when
# given) loads it with the build tree's `tandem` and runs the conformance kit.
#
#   package_config.sh <build dir> <source dir> [<tandem exe> | -] [<reference plugin>]
set -euo pipefail

build=${1:?build dir}
source=${2:?source dir}
tandem=${3:-}
reference=${4:-}
[[ "$tandem" == "-" ]] && tandem=""

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

step() { echo "== $*"; }

step "install component dev into $prefix"
cmake --install "$build" --prefix "$prefix" --component dev >"$work/install.log"
config=$(find "$prefix" -name TandemSDKConfig.cmake -print -quit)
if [[ -z "$config" ]]; then
  echo "no TandemSDKConfig.cmake installed by component dev" >&2
  cat "$work/install.log" >&2
  exit 1
fi
echo "   $config"

step "configure and build hello_backend against it"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# Only the temporary prefix may provide TandemSDK (no registry, no environment).
env -u CMAKE_PREFIX_PATH -u TandemSDK_DIR -u TandemSDK_ROOT \
  cmake -S "$source/sdk/examples/hello_backend" -B "$work/hello" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >"$work/configure.log" ||
  { cat "$work/configure.log" >&2; exit 1; }
found=$(sed -n 's/^TandemSDK_DIR:PATH=//p' "$work/hello/CMakeCache.txt")
if [[ "$found" != "$prefix"/* ]]; then
  echo "TandemSDK found at '$found', not in the temporary prefix" >&2
  exit 1
fi
cmake --build "$work/hello" >"$work/build.log" || { cat "$work/build.log" >&2; exit 1; }
plugin="$work/hello/libtandem-hello.so"
[[ -f "$plugin" ]] || { echo "no $plugin" >&2; ls -la "$work/hello" >&2; exit 1; }

step "exports: only tdm_plugin_entry"
exported=$(nm -D --defined-only "$plugin" | awk '$2 ~ /^[TDBVWRi]$/ { print $3 }' | sort)
if [[ "$exported" != "tdm_plugin_entry" ]]; then
  echo "libtandem-hello.so exports more than tdm_plugin_entry:" >&2
  echo "$exported" >&2
  exit 1
fi

step "cmake --install puts it in the SDK's plugin directory"
cmake --install "$work/hello" >"$work/install-hello.log"
installed=$(find "$prefix" -path '*/tandem/plugins/libtandem-hello.so' -print -quit)
[[ -n "$installed" ]] || { echo "libtandem-hello.so not installed under $prefix/*/tandem/plugins" >&2; cat "$work/install-hello.log" >&2; exit 1; }
echo "   $installed"

if [[ -n "$tandem" ]]; then
  step "tandem plugins --plugin-path $work/hello"
  out=$(env -u TANDEM_PLUGIN_PATH "$tandem" plugins --plugin-path "$work/hello" 2>&1) || { echo "$out" >&2; exit 1; }
  echo "$out"
  grep -qw hello <<<"$out" || { echo "the host did not list 'hello'" >&2; exit 1; }
fi

driver="$prefix/bin/tandem-conformance"
if [[ -x "$driver" && -n "$reference" ]]; then
  step "tandem-conformance --plugin libtandem-hello.so (what it implements must pass)"
  # Exit 0 = no case failed; declined cases (other ops, dtypes, broadcasts) are UNSUPPORTED.
  # The build's copy shadows the one just installed beside this driver: as
  # with the host, testing it takes --override-plugin, and says so.
  conf=$("$driver" --plugin "$plugin" --reference "$reference" --override-plugin hello --verbose 2>&1) ||
    { echo "$conf" >&2; exit 1; }
  grep -q "warning: plugin 'hello' is $plugin, not the installed" <<<"$conf" ||
    { echo "$conf" >&2; echo "no warning about the installed hello" >&2; exit 1; }
  tail -n 2 <<<"$conf"
  for op in fill copy add relu relu_grad; do
    grep -q "^PASS $op f32" <<<"$conf" || { echo "$conf" >&2; echo "no passing f32 case of '$op'" >&2; exit 1; }
  done
fi
echo "sdk.package_config: OK"
