#!/usr/bin/env bash
# Builds the S3-compatible test server s3s-fs from crates.io, once, into a cache outside the
# repository keyed by version, and prints the binary's path on the last line of stdout. Progress
# goes to stderr.
set -euo pipefail

VERSION="${GC_S3S_FS_VERSION:-0.14.1}"
CACHE="${GC_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gc-testbed}"
ROOT="$CACHE/s3s-fs-$VERSION"
BIN="$ROOT/bin/s3s-fs"

log() { echo "s3.sh: $*" >&2; }

if [ ! -x "$BIN" ]; then
  log "building s3s-fs $VERSION (first time only)"
  cargo install s3s-fs --version "$VERSION" --features binary --locked --root "$ROOT" >&2
  [ -x "$BIN" ] || { log "cargo install did not produce $BIN"; exit 1; }
  log "built $BIN"
fi
echo "$BIN"
