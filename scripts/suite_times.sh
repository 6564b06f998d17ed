#!/usr/bin/env bash
# Prints the per-suite time table of a run from the file scripts/timed_shell.sh wrote: one row a
# make target in the order they ran (its recipe lines' time added up), then the total.
set -euo pipefail
file=${1:?usage: suite_times.sh TIMES_FILE}
[ -s "$file" ] || { echo "suite times: nothing recorded"; exit 0; }
awk '
  !($1 in secs) { order[n++] = $1 }
  { secs[$1] += $2; total += $2 }
  END {
    printf "%-16s %9s %6s\n", "suite", "seconds", "share"
    for (i = 0; i < n; i++)
      printf "%-16s %9.1f %5.1f%%\n", order[i], secs[order[i]], total ? 100 * secs[order[i]] / total : 0
    printf "%-16s %9.1f  (%.1f min)\n", "total", total, total / 60
  }' "$file"
