#!/usr/bin/env bash
# Installs the S3-compatible test server moto (`moto[server]` from PyPI, which answers as AWS
# does), once, into a virtual environment in a cache outside the repository keyed by version, and
# prints the `moto_server` executable's path on the last line of stdout. Progress goes to stderr.
set -euo pipefail

VERSION="${GC_MOTO_VERSION:-5.2.5}"
CACHE="${GC_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gc-testbed}"
ROOT="$CACHE/moto-$VERSION"
BIN="$ROOT/bin/moto_server"

log() { echo "moto.sh: $*" >&2; }

if [ ! -x "$BIN" ]; then
  log "installing moto[server] $VERSION (first time only)"
  # The interpreter itself, not a version manager's shim that may pick another one later.
  PYTHON=$(python3 -c 'import sys; print(sys.executable)')
  # A virtual environment cannot be moved (its scripts name its path), so it is made in place and
  # $BIN, a link into it, is made last: a missing $BIN means an install that did not finish, which
  # is started over.
  rm -rf "$ROOT"
  mkdir -p "$ROOT/bin"
  "$PYTHON" -m venv "$ROOT/venv" >&2
  "$ROOT/venv/bin/python" -m pip install --quiet "moto[server]==$VERSION" >&2
  [ -x "$ROOT/venv/bin/moto_server" ] || { log "pip install did not produce moto_server"; exit 1; }
  ln -s ../venv/bin/moto_server "$BIN"
  log "installed $BIN"
fi
echo "$BIN"
