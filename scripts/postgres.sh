#!/usr/bin/env bash
# Makes sure a PostgreSQL server for the tests runs on loopback, and prints its admin URL on the
# last line of stdout. Installs PostgreSQL from Debian's packages when missing, initialises a data
# folder outside the repository once, starts the server only when it is not running. Quick and
# idempotent when it already runs. Progress goes to stderr.
#
# Environment: GC_PG_PORT (default 54329), GC_PG_DATA (default: a folder the server's user owns).
set -euo pipefail

PORT="${GC_PG_PORT:-54329}"
ROLE=gc
PASSWORD=gc
URL="postgres://$ROLE:$PASSWORD@127.0.0.1:$PORT/postgres"

log() { echo "postgres.sh: $*" >&2; }

# The newest installed server's bin folder, if any.
server_bin() {
  local bins
  bins=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$bins" ] && [ -x "$bins/postgres" ] && [ -x "$bins/initdb" ] && echo "$bins"
}

BIN=$(server_bin || true)
if [ -z "$BIN" ]; then
  [ "$(id -u)" = 0 ] || { log "PostgreSQL is not installed; run as root to install it"; exit 1; }
  log "installing PostgreSQL from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update >&2
  apt-get install -y --no-install-recommends postgresql >&2
  BIN=$(server_bin) || { log "no PostgreSQL server after installing"; exit 1; }
fi
VERSION=$(basename "$(dirname "$BIN")")

# initdb refuses root: as root the server runs as `postgres`, in a folder that user can reach
# (root's home is private); otherwise as the current user, in its cache folder.
if [ "$(id -u)" = 0 ]; then
  DATA="${GC_PG_DATA:-/var/lib/postgresql/gc-testbed/$VERSION}"
  as_server() { runuser -u postgres -- "$@" 9>&-; }
  mkdir -p "$(dirname "$DATA")"
  chown postgres: "$(dirname "$DATA")"
else
  DATA="${GC_PG_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/gc-testbed/pg-$VERSION}"
  as_server() { "$@" 9>&-; }
  mkdir -p "$(dirname "$DATA")"
fi

# One caller at a time sets up and starts the server (the server must not inherit the lock: see
# as_server).
exec 9>"$(dirname "$DATA")/.gc-testbed-pg.lock"
flock 9

if [ ! -f "$DATA/PG_VERSION" ]; then
  log "initialising $DATA (PostgreSQL $VERSION)"
  pwfile=$(mktemp)
  echo "$PASSWORD" > "$pwfile"
  chmod 644 "$pwfile"
  as_server "$BIN/initdb" -D "$DATA" -U "$ROLE" --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >&2
  rm -f "$pwfile"
  # A throwaway test server: loopback only, speed over durability.
  cat >> "$DATA/postgresql.conf" <<CONF

# scripts/postgres.sh
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DATA'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
CONF
fi

if as_server "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  log "already running on 127.0.0.1:$PORT ($DATA)"
else
  log "starting PostgreSQL $VERSION on 127.0.0.1:$PORT ($DATA)"
  if ! as_server "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -o "-p $PORT" -w -t 60 start >&2; then
    log "the server did not start; its log ends with:"
    tail -n 30 "$DATA/server.log" >&2 || true
    exit 1
  fi
fi

# The role and password are set by initdb; check that they work over TCP.
if ! PGPASSWORD=$PASSWORD PGCONNECT_TIMEOUT=5 "$BIN/psql" -X -q -w -At "$URL" -c 'SELECT 1' >/dev/null; then
  log "cannot log in as $ROLE on 127.0.0.1:$PORT (is another server on that port? set GC_PG_PORT)"
  exit 1
fi
echo "$URL"
