#!/usr/bin/env bash
# sdk.abi — compares the ABI of the SDK, as seen through the probe library
# (abi_probe.c), with the committed baseline, using libabigail.
#
#   check_abi.sh <probe.so> <baseline.xml> <current ABI version, e.g. 1.1>
#
# Policy (sdk/ABI.md rules 4 and 5: append only):
#   compatible    fields appended at the end of a struct or table, new
#                 structs/tables (new probe functions);
#   incompatible  anything else: a field removed, moved, renamed to another
#                 type, a function-pointer signature changed, a size shrunk.
# abidiff sets bit 8 (ABIDIFF_ABI_INCOMPATIBLE_CHANGE) only for removed
# symbols; a reordered or retyped field only sets bit 4 (ABIDIFF_ABI_CHANGE),
# and its suppression `has_data_member_inserted_at = end` also hides those in
# libabigail 2.2. So when bit 4 is set, every line of the report must match
# the allow-list below (fail closed: an unknown kind of report line fails).
set -euo pipefail

probe=${1:?usage: check_abi.sh <probe.so> <baseline.xml>}
baseline=${2:?usage: check_abi.sh <probe.so> <baseline.xml> <abi version>}
abi_version=${3:?usage: check_abi.sh <probe.so> <baseline.xml> <abi version>}
# tandem-abi-1.1.xml -> 1.1
baseline_version=$(basename "$baseline" .xml)
baseline_version=${baseline_version#tandem-abi-}

for tool in abidw abidiff; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "sdk.abi: $tool not found; install abigail-tools (scripts/install-deps.sh)" >&2
    exit 1
  fi
done
if [[ ! -f "$baseline" ]]; then
  echo "sdk.abi: no baseline $baseline; create it with scripts/update-abi-baseline.sh" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
current="$work/current.xml"
abidw --no-corpus-path --no-comp-dir-path --short-locs --out-file "$current" "$probe"

set +e
abidiff "$baseline" "$current" >"$work/report.txt" 2>&1
rc=$?
set -e

if ((rc == 0)); then
  echo "sdk.abi: ABI identical to $(basename "$baseline")"
  exit 0
fi
if ((rc & 3)); then
  echo "sdk.abi: abidiff failed (exit $rc):" >&2
  cat "$work/report.txt" >&2
  exit 1
fi
if ((rc & 8)); then
  echo "sdk.abi: INCOMPATIBLE ABI change against $(basename "$baseline") (abidiff exit $rc):" >&2
  cat "$work/report.txt" >&2
  exit 1
fi

# Bit 4 only: classify every line of the report.
bad=$(awk '
  /^[[:space:]]*$/ { next }
  /^Functions changes summary: 0 Removed, / { next }
  /^Variables changes summary: 0 Removed, / { next }
  /^[0-9]+ functions? with some indirect sub-type changes?:$/ { next }
  /^[0-9]+ Added functions?:$/ { next }
  /^ *\[A\] '\''/ { next }
  /^ *\[C\] '\''.*'\'' .*has some indirect sub-type changes:$/ { next }
  /^ *parameter [0-9]+ of type '\''.*'\'' has sub-type changes:$/ { next }
  /^ *in pointed to type '\''.*'\''.*:$/ { next }
  /^ *in unqualified underlying type '\''.*'\''.*:$/ { next }
  /^ *underlying type '\''.*'\''.* changed:$/ { next }
  /^ *(pointed to|unqualified underlying) type '\''.*'\'' changed.*, as reported earlier$/ { next }
  /^ *return type changed:$/ { next }
  /^ *type of '\''.*'\'' changed:$/ { next }
  /^ *type size hasn'\''t changed$/ { next }
  /^ *[0-9]+ data member changes?( \([0-9]+ filtered\))?:$/ { next }
  /^ *[0-9]+ data member insertions?:$/ { inserting = 1; next }
  inserting && /^ *'\''.*'\'', at offset [0-9]+ \(in bits\)/ { next }
  /^ *type size changed from [0-9]+ to [0-9]+ \(in bits\)$/ {
    from = $5 + 0; to = $7 + 0
    if (to > from) next
  }
  { inserting = 0; print }
' "$work/report.txt")

if [[ -n "$bad" ]]; then
  echo "sdk.abi: INCOMPATIBLE ABI change against $(basename "$baseline"); offending lines:" >&2
  printf '%s\n' "$bad" >&2
  echo "---- full abidiff report ----" >&2
  cat "$work/report.txt" >&2
  echo "Fields may only be appended (sdk/ABI.md rules 4-5). If the break is deliberate, it needs a new ABI major," >&2
  echo "a CHANGELOG entry and scripts/update-abi-baseline.sh." >&2
  exit 1
fi

cat "$work/report.txt"
if [[ "$abi_version" == "$baseline_version" ]]; then
  echo "sdk.abi: the ABI grew (above) but TDM_ABI_MINOR is still $abi_version, the version of the baseline." >&2
  echo "Appending is compatible, but plugins must be able to tell: bump TDM_ABI_MINOR in version.h, add an" >&2
  echo "sdk/CHANGELOG.md entry, and record the new ABI with scripts/update-abi-baseline.sh." >&2
  exit 1
fi
echo "sdk.abi: ABI $abi_version only appends to $baseline_version (compatible). Record it with"
echo "scripts/update-abi-baseline.sh (new file sdk/abi/tandem-abi-$abi_version.xml) when releasing."
