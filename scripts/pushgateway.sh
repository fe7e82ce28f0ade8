#!/usr/bin/env bash
# Makes sure a Prometheus Pushgateway (Debian's package) listens on loopback for the tests, and
# prints its URL on the last line of stdout. Installs the package when missing (as root), starts
# the server only when it is not already answering. Progress goes to stderr.
set -euo pipefail
PORT="${GC_PUSHGATEWAY_PORT:-59091}"
URL="http://127.0.0.1:$PORT"
log() { echo "pushgateway.sh: $*" >&2; }

if ! command -v prometheus-pushgateway >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || { log "prometheus-pushgateway is not installed; run as root to install it"; exit 1; }
  log "installing prometheus-pushgateway from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends prometheus-pushgateway >&2 \
    || { apt-get update >&2 && apt-get install -y --no-install-recommends prometheus-pushgateway >&2; }
  # The package starts a service on the default port where an init system runs; ours is separate.
fi
if ! curl -fsS "$URL/-/ready" >/dev/null 2>&1; then
  log "starting prometheus-pushgateway on $URL"
  nohup prometheus-pushgateway --web.listen-address="127.0.0.1:$PORT" >/tmp/gc-pushgateway.log 2>&1 &
  for _ in $(seq 50); do
    curl -fsS "$URL/-/ready" >/dev/null 2>&1 && break
    sleep 0.2
  done
  curl -fsS "$URL/-/ready" >/dev/null || { log "the Pushgateway did not start"; cat /tmp/gc-pushgateway.log >&2; exit 1; }
fi
echo "$URL"
