#!/usr/bin/env bash
# Fails when a tracked source file cites the issue tracker by number (the
# word issue, then a number, with or without '#'): the tracker is not part
# of the repository, so such a comment points nowhere for a reader of the
# code; say the reason instead.
#
#   check_issue_refs.sh GIT [FILE...]   (without files: every tracked source file)
set -euo pipefail
git=${1:-}
shift || true
if (($# == 0)); then
  if [[ -z "$git" ]] || ! "$git" rev-parse --git-dir > /dev/null 2>&1; then
    echo "SKIPPED: not a git checkout, so the tracked files are unknown"
    exit 77
  fi
  mapfile -t files < <("$git" ls-files '*.c' '*.h' '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.sh' '*.py' '*.cmake' \
    'CMakeLists.txt' '*/CMakeLists.txt' '*.toml')
else
  files=("$@")
fi
# "issue" or "Issue", optionally "#", then a number; a line that says it
# means another project's tracker ("upstream issue 190") is fine.
found=$(grep -nHE '\b[Ii]ssues? #?[0-9]+' "${files[@]}" | grep -v 'upstream' || true)
if [[ -n "$found" ]]; then
  echo "$found"
  echo "the lines above cite issue numbers; say the reason in the comment instead (the tracker is not in the repository)"
  exit 1
fi
echo "no issue numbers cited in ${#files[@]} files"
