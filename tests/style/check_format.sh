#!/usr/bin/env bash
# Fails when a tracked C/C++/CUDA file differs from what clang-format makes
# of it; prints the files and the command that fixes them.
set -euo pipefail
clang_format=${1:-}
git=${2:-}
if [[ -z "$clang_format" || ! -x "$clang_format" ]]; then
  echo "SKIPPED: clang-format is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
# The tree is formatted with Debian 12's clang-format 14; other major
# versions lay out some constructs differently (Debian 13's 19 would change
# at least eleven files), so they cannot judge it.
formatted_with=14
major=$("$clang_format" --version | sed -n 's/.*clang-format version \([0-9]*\).*/\1/p')
if [[ "$major" != "$formatted_with" ]]; then
  echo "SKIPPED: $clang_format is version ${major:-unknown}; the tree is formatted with clang-format $formatted_with (Debian 12's clang-format package)"
  exit 77
fi
if [[ -z "$git" ]] || ! "$git" rev-parse --git-dir >/dev/null 2>&1; then
  echo "SKIPPED: not a git checkout, so the tracked files are unknown"
  exit 77
fi
mapfile -t files < <("$git" ls-files '*.c' '*.h' '*.cpp' '*.hpp' '*.cu' '*.cuh')
# Many files per clang-format process, two processes at once: one process
# per file spent most of this test starting clang-format. A file that
# differs is named in the diagnostics ("FILE:LINE:COL: error: ...").
report=$(mktemp)
trap 'rm -f "$report"' EXIT
status=0
printf '%s\0' "${files[@]}" | xargs -0 -n 64 -P 2 "$clang_format" --dry-run --Werror 2>"$report" >/dev/null ||
  status=$?
mapfile -t bad < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*/\1/p' "$report" | sort -u)
if ((status != 0 && ${#bad[@]} == 0)); then
  cat "$report"
  echo "clang-format failed (status $status) without naming a file that differs"
  exit 1
fi
if ((${#bad[@]})); then
  printf 'not formatted: %s\n' "${bad[@]}"
  echo "fix with: clang-format -i ${bad[*]}"
  exit 1
fi
echo "${#files[@]} files follow .clang-format"
