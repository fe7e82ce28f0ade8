#!/usr/bin/env bash
# Makes sure Prometheus and promtool (Debian's package) are installed for the tests, and prints
# the directory holding both binaries on the last line of stdout. Installs the package when
# missing (as root). Starts no server: each end-to-end test starts its own Prometheus with its own
# configuration, port and storage. Progress goes to stderr.
set -euo pipefail
log() { echo "prometheus.sh: $*" >&2; }

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || { log "prometheus is not installed; run as root to install it"; exit 1; }
  log "installing prometheus (and promtool) from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends prometheus >&2 \
    || { apt-get update >&2 && apt-get install -y --no-install-recommends prometheus >&2; }
  # The package starts a service on the default port where an init system runs; the tests do
  # not use it.
fi
for tool in prometheus promtool; do
  command -v "$tool" >/dev/null 2>&1 || { log "$tool is missing after the install"; exit 1; }
done
log "$(prometheus --version 2>&1 | head -n 1)"
dirname "$(command -v promtool)"
