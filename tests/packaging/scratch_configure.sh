# Sourced by the packaging tests that configure a scratch build of the
# source tree without building it (plugin_dir_follows_prefix.sh,
# kernels_at_o3.sh). `scratch_setup NAME SOURCE` sets $source and a scratch
# $work (removed on exit); `fail MESSAGE` exits 1 naming the test;
# `configure ARGS...` (re)configures $work/build, host and CPU plugins only,
# and on failure prints cmake's output.
scratch_setup() {
  scratch_test=$1
  source=$2
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
}
fail() {
  echo "$scratch_test: $*" >&2
  exit 1
}
configure() {
  cmake -S "$source" -B "$work/build" -DTANDEM_BUILD_TESTS=OFF -DTANDEM_BUILD_CUDA=OFF "$@" \
    >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; fail "configure $* failed"; }
}
