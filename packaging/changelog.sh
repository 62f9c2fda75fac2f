#!/bin/sh
# Turns packaging/changelog (Debian changelog format, the one source of the
# packages' history) into what each package format wants:
#   <out dir>/changelog.Debian.gz   every deb's /usr/share/doc/<package>/
#                                   (gzip -9n: no name or time stamp, so the
#                                   same source gives the same bytes)
#   <out dir>/changelog.rpm         the rpm %changelog (CPACK_RPM_CHANGELOG_FILE)
#
#   changelog.sh <packaging/changelog> <out dir>
#
# An entry is read as Debian writes it:
#   tandem (0.1.0-1) unstable; urgency=medium
#   <blank>
#     * change, wrapped
#       continuation
#   <blank>
#    -- Name <mail>  Wed, 25 Nov 2026 00:00:00 +0000
# and becomes, for rpm:
#   * Wed Nov 25 2026 Name <mail> - 0.1.0-1
#   - change, wrapped
#     continuation
set -eu

source=${1:?changelog source}
out=${2:?output directory}
mkdir -p "$out"

gzip -9n -c "$source" >"$out/changelog.Debian.gz.tmp"
mv "$out/changelog.Debian.gz.tmp" "$out/changelog.Debian.gz"

awk '
  function flush() {
    if (version == "") return
    if (date == "") { print "changelog: entry " version " has no trailer line" > "/dev/stderr"; exit 1 }
    if (entries++) print ""
    print "* " date " " who " - " version
    printf "%s", body
    version = ""; body = ""; date = ""
  }
  /^[a-z0-9][a-z0-9.+-]* \(/ {
    flush()
    version = $2; gsub(/[()]/, "", version)
    next
  }
  # (% starts a macro in a spec file: %% is a literal one.)
  /^  \* / { sub(/^  \* /, ""); gsub(/%/, "%%"); body = body "- " $0 "\n"; next }
  /^    [^ ]/ { sub(/^    /, ""); gsub(/%/, "%%"); body = body "  " $0 "\n"; next }
  /^ -- / {
    # " -- Name <mail>  Wed, 25 Nov 2026 00:00:00 +0000": two spaces end the name.
    line = substr($0, 5)
    split_at = index(line, ">  ")
    if (split_at == 0) { print "changelog: bad trailer: " $0 > "/dev/stderr"; exit 1 }
    who = substr(line, 1, split_at)
    n = split(substr(line, split_at + 3), d, " ")
    if (n < 4) { print "changelog: bad date: " $0 > "/dev/stderr"; exit 1 }
    sub(/,$/, "", d[1])
    date = d[1] " " d[3] " " d[2] " " d[4]
    next
  }
  /^[[:space:]]*$/ { next }
  { print "changelog: line not understood: " $0 > "/dev/stderr"; exit 1 }
  END { flush() }
' "$source" >"$out/changelog.rpm.tmp"
mv "$out/changelog.rpm.tmp" "$out/changelog.rpm"
