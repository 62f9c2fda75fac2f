#!/usr/bin/env bash
# packaging.plugin_dir_follows_prefix — where plugins install follows the
# install prefix of the latest configure. scripts/demo.sh configures build/
# for /usr/local (libdir lib) and scripts/test.sh then the same build/ for
# /usr (libdir lib/x86_64-linux-gnu on Debian): the packages and the host
# must take the second one's directory, not a cached first one. An explicit
# -DTANDEM_PLUGIN_INSTALL_DIR stays as given. Configures only (no build).
#
#   plugin_dir_follows_prefix.sh <source dir>
set -euo pipefail

. "$(dirname "$0")/scratch_configure.sh"
scratch_setup packaging.plugin_dir_follows_prefix "${1:?source dir}"

# Where the reference plugin would be installed, relative to the prefix.
installed_dir() {
  sed -n 's|.*{CMAKE_INSTALL_PREFIX}/\(.*\)/libtandem-reference.so".*|\1|p' \
    "$work/build/plugins/reference/cmake_install.cmake" | head -1
}
libdir() {
  sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$work/build/CMakeCache.txt"
}

configure -DCMAKE_INSTALL_PREFIX=/usr/local
first=$(installed_dir)
[[ "$first" == "$(libdir)/tandem/plugins" ]] || fail "for /usr/local: $first, not $(libdir)/tandem/plugins"
configure -DCMAKE_INSTALL_PREFIX=/usr
second=$(installed_dir)
[[ "$second" == "$(libdir)/tandem/plugins" ]] ||
  fail "reconfigured for /usr: plugins go to $second, not $(libdir)/tandem/plugins"
echo "/usr/local: $first; then /usr: $second"
configure -DTANDEM_PLUGIN_INSTALL_DIR=lib/elsewhere/plugins
[[ "$(installed_dir)" == "lib/elsewhere/plugins" ]] || fail "an explicit TANDEM_PLUGIN_INSTALL_DIR was not kept: $(installed_dir)"
echo "explicit: lib/elsewhere/plugins kept"
