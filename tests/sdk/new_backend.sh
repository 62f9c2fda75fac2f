#!/usr/bin/env bash
# sdk.new_backend — from an empty directory to a loaded backend with only an
# installed SDK: installs the `dev` component of this build into a temporary
# prefix, runs its `tandem-conformance --new-backend mine DIR`, builds DIR
# against the prefix, loads the plugin with the build tree's `tandem`, runs
# the conformance kit on it, and trains its example model, whose relu layer
# is pinned to mine:0. Prints the seconds from the empty directory to the
# loaded plugin.
#
#   new_backend.sh <build dir> <tandem exe> <reference plugin>
set -euo pipefail

build=${1:?build dir}
tandem=${2:?tandem exe}
reference=${3:?reference plugin}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
step() { echo "== $*"; }
fail() { echo "sdk.new_backend: $*" >&2; exit 1; }

step "install component dev into $prefix"
cmake --install "$build" --prefix "$prefix" --component dev >"$work/install.log"
driver="$prefix/bin/tandem-conformance"
[[ -x "$driver" ]] || fail "no tandem-conformance installed by component dev"
# The reference backend where the `tandem` package puts it, beside the SDK:
# the installed plugin the kit takes as its oracle and names no skeleton after.
config=$(find "$prefix" -name TandemSDKConfig.cmake -print -quit)  # <libdir>/cmake/TandemSDK/
libdir=$(dirname "$(dirname "$(dirname "$config")")")
mkdir -p "$libdir/tandem/plugins"
cp "$reference" "$libdir/tandem/plugins/"

start=$(date +%s.%N)
step "tandem-conformance --new-backend mine $work/mine"
"$driver" --new-backend mine "$work/mine"
for f in CMakeLists.txt mine.cpp pinned_layer.toml README.md; do
  [[ -f "$work/mine/$f" ]] || fail "--new-backend wrote no $f"
done
if grep -n -i hello "$work/mine"/*; then fail "the skeleton still says hello"; fi
if "$driver" --new-backend mine "$work/mine" 2>"$work/again.err"; then fail "a second --new-backend into the same directory was accepted"; fi
grep -q "exists already" "$work/again.err" || fail "unclear refusal of an existing directory: $(cat "$work/again.err")"
if "$driver" --new-backend reference "$work/ref" 2>"$work/ref.err"; then fail "a skeleton named like the installed reference was accepted"; fi
grep -q "the name of the installed plugin" "$work/ref.err" || fail "unclear refusal of the name 'reference': $(cat "$work/ref.err")"
[[ ! -e "$work/ref" ]] || fail "a refused --new-backend left $work/ref behind"

step "build it against the installed SDK"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
env -u CMAKE_PREFIX_PATH -u TandemSDK_DIR -u TandemSDK_ROOT \
  cmake -S "$work/mine" -B "$work/mine/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_COMPILE_WARNING_AS_ERROR=ON \
  >"$work/configure.log" || { cat "$work/configure.log" >&2; fail "configure failed"; }
cmake --build "$work/mine/build" >"$work/build.log" || { cat "$work/build.log" >&2; fail "build failed"; }

step "tandem plugins --plugin-path $work/mine/build"
out=$(env -u TANDEM_PLUGIN_PATH "$tandem" plugins --plugin-path "$work/mine/build" 2>&1) || { echo "$out" >&2; fail "plugins failed"; }
grep -q "^mine " <<<"$out" || { echo "$out" >&2; fail "the host did not load 'mine'"; }
end=$(date +%s.%N)
printf 'from an empty directory to a loaded plugin: %.1f s\n' "$(echo "$end - $start" | bc)"

step "tandem-conformance --plugin libtandem-mine.so"
conf=$("$driver" --plugin "$work/mine/build/libtandem-mine.so" --verbose 2>&1) || { echo "$conf" >&2; fail "conformance failed"; }
for op in fill copy add relu relu_grad; do
  grep -q "^PASS $op f32" <<<"$conf" || { echo "$conf" >&2; fail "no passing f32 case of '$op'"; }
done
grep -E "passed, .* failed" <<<"$conf"

step "tandem train pinned_layer.toml (relu on mine:0)"
plan=$(cd "$work" && env -u TANDEM_PLUGIN_PATH "$tandem" plan mine/pinned_layer.toml --plugin-path mine/build --device reference 2>&1) || { echo "$plan" >&2; fail "plan failed"; }
grep -Eq "act +relu +mine:0" <<<"$plan" || { echo "$plan" >&2; fail "the relu layer is not on mine:0"; }
train=$(cd "$work" && env -u TANDEM_PLUGIN_PATH "$tandem" train mine/pinned_layer.toml --plugin-path mine/build \
  --device reference --run-dir run --check-bounds 2>&1) || { echo "$train" >&2; fail "training failed"; }
tail -n 2 <<<"$train"
echo "sdk.new_backend: OK"
