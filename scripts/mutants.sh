#!/usr/bin/env bash
# Mutation testing of the safety code of gc-core (the apply protocol, sealed plan files, the
# session policy) with cargo-mutants: every mutant the tests do not catch is listed. Not part of
# the default test command (it rebuilds gc-core once per mutant); see docs/mutation-testing.md.
#
#   scripts/mutants.sh                      # the default files below
#   scripts/mutants.sh -f gc-core/src/pods/apply.rs   # extra arguments go to cargo mutants
#   scripts/mutants.sh runtime              # the run lifecycle: gc-runtime's lock, collectors,
#                                           # restore and error kinds, by gc-runtime's own tests
#                                           # (no API server)
#
# Installs cargo-mutants (pinned) into ${GC_TOOLS:-~/.cache/gc-tools} when it is missing; the
# report goes to ${MUTANTS_OUT:-target/mutants}/mutants.out (caught.txt, missed.txt, ...).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=27.1.0
TOOLS=${GC_TOOLS:-$HOME/.cache/gc-tools}
OUT=${MUTANTS_OUT:-target/mutants}
BIN="$TOOLS/bin/cargo-mutants"

if ! "$BIN" mutants --version 2>/dev/null | grep -qx "cargo-mutants $VERSION"; then
  cargo install --locked "cargo-mutants@$VERSION" --root "$TOOLS"
fi

PACKAGE=gc-core
if [ "${1:-}" = runtime ]; then
  shift
  PACKAGE=gc-runtime
  [ "$#" -gt 0 ] || set -- -f gc-runtime/src/lock.rs -f gc-runtime/src/sessions.rs \
    -f gc-runtime/src/restore.rs -f gc-runtime/src/pods.rs -f gc-runtime/src/error.rs
elif [ "$#" -eq 0 ]; then
  set -- -f gc-core/src/lease.rs -f gc-core/src/pods/apply.rs -f gc-core/src/pods/approval.rs \
    -f gc-core/src/sessions/config.rs -f gc-core/src/sessions/plan.rs -f gc-core/src/sessions/run.rs \
    -f gc-core/src/sessions/manifest.rs -f gc-core/src/sessions/volumes.rs \
    -f gc-core/src/sessions/volumes/lifecycle.rs
fi

mkdir -p "$OUT"
# One mutant at a time (two cores), the package's unit tests only (every test of these files is one),
# a test that runs five minutes is a timeout. Exit status: 0 when every mutant is caught or
# unviable, 2 when some are missed, 3 on timeouts (cargo mutants' own).
exec nice -n 19 "$BIN" mutants -p "$PACKAGE" "$@" \
  --test-tool cargo --cargo-test-arg=--lib \
  -j 1 --timeout 300 --build-timeout 600 \
  --output "$OUT"
