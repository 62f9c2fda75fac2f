#!/bin/sh
# Writes the manual page of a built program from its own --help (and, with
# --commands, from `<program> <command> --help` of every command its help
# lists), so the page and --help never drift: the build regenerates the page
# whenever the program is rebuilt (packaging/CMakeLists.txt). The text is
# turned into troff by help2man.awk, next to this script.
#
#   help2man.sh --program <built program> --name <name> --whatis <text>
#               --version <text> [--date <text>] [--section 1] [--commands]
#               [--see-also "page(1), other(1)"] --output <file>
#
# <name> is the installed name (the page's title and the synopsis's program);
# <output> is written uncompressed; the caller gzips it.
set -eu

program='' name='' whatis='' version='' date='' section=1 commands=0 see_also='' output=''
while [ $# -gt 0 ]; do
  case $1 in
    --program) program=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --whatis) whatis=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    --date) date=$2; shift 2 ;;
    --section) section=$2; shift 2 ;;
    --see-also) see_also=$2; shift 2 ;;
    --commands) commands=1; shift ;;
    --output) output=$2; shift 2 ;;
    *) echo "help2man.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for required in program name whatis version output; do
  eval "value=\$$required"
  [ -n "$value" ] || { echo "help2man.sh: --$required is required" >&2; exit 2; }
done

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The C locale and no plugin path from the caller's environment: the page
# must not depend on who builds it.
run() { env -u TANDEM_PLUGIN_PATH LC_ALL=C "$program" "$@"; }

run --help >"$tmp/help"
if [ "$commands" = 1 ]; then
  mkdir "$tmp/commands"
  # The command names: the first word of each entry of the "Commands:" section.
  for command in $(awk '/^Commands:$/ { on = 1; next } on && /^[ \t]*$/ { exit } on { print $1 }' "$tmp/help"); do
    run "$command" --help >"$tmp/commands/cmd-$command"
  done
  set -- "$tmp"/commands/cmd-*
  [ -e "$1" ] || { echo "help2man.sh: --commands, but '$program --help' lists no commands" >&2; exit 1; }
else
  set --
fi

awk -v prog="$name" -v section="$section" -v whatis="$whatis" -v version="$version" \
  -v date="$date" -v see_also="$see_also" -f "$here/help2man.awk" "$tmp/help" "$@" >"$output.tmp"
mv "$output.tmp" "$output"
