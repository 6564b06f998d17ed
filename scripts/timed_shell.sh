#!/usr/bin/env bash
# make's recipe shell while $LOADERX_SUITE_TIMES names a file (.ci/run sets it): runs one recipe
# line with bash, then appends "<target> <seconds>" to that file, so a run's time adds up per
# suite (scripts/suite_times.sh prints the table). Called as: timed_shell.sh TARGET -c LINE.
target=$1
shift
start=$EPOCHREALTIME
/bin/bash "$@"
status=$?
printf '%s %s\n' "$target" "$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')" \
  >>"$LOADERX_SUITE_TIMES"
exit "$status"
