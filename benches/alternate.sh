#!/usr/bin/env bash
# A `GC_CLI` for `delete-speed` that compares two gc-cli builds in one run: it runs GC_A and
# GC_B in turn, call by call, and appends each call's label and wall time to GC_AB_LOG. With
# GC_AB_PATHS=1 it runs GC_A only, giving every other call its store and archives on a memory
# file system (`/dev/shm`) instead: what the disk costs.
#
#   GC_A=/tmp/gc-cli.old GC_B=target/release/gc-cli GC_AB_LOG=ab.log GC_CLI=benches/alternate.sh \
#     target/release/delete-speed 5000 0 6 8 && sort ab.log
set -uo pipefail
log=${GC_AB_LOG:?set GC_AB_LOG: where each call is logged}
n=0
if [ -f "$log" ]; then n=$(wc -l < "$log"); fi
args=("$@")
if [ "${GC_AB_PATHS:-}" = 1 ]; then
  bin=${GC_A:?set GC_A}
  label=disk
  if [ $((n % 2)) = 1 ]; then
    label=memory
    shm=$(mktemp -d /dev/shm/gc-ab.XXXXXX)
    trap 'rm -rf "$shm"' EXIT
    for i in "${!args[@]}"; do
      case "${args[$i]}" in
        --store) args[i + 1]="sqlite:$shm/gc.sqlite3" ;;
        --archive-dir) args[i + 1]="$shm/archives" ;;
      esac
    done
  fi
elif [ $((n % 2)) = 0 ]; then
  bin=${GC_A:?set GC_A} label=A
else
  bin=${GC_B:?set GC_B} label=B
fi
start=$(date +%s%N)
"$bin" "${args[@]}"
rc=$?
echo "$label $(( ($(date +%s%N) - start) / 1000000 )) ms" >> "$log"
exit $rc
