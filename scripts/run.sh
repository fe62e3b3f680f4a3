#!/usr/bin/env bash
# `make run`: a throwaway cluster with pg_snowflake preloaded, a demo table, and the command to
# connect. `make stop` (scripts/run.sh stop) stops it. Assumes `make install` has run.
#
# The cluster of major N lives in target/run-pgN when the postgres user can reach it
# (PostgreSQL refuses to run as root), else in /tmp/pg_snowflake-run-pgN (a checkout under /root
# is closed to postgres). One cluster runs at a time, on 127.0.0.1:28815.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_BIN=$("${PG_CONFIG:-pg_config}" --bindir)
MAJOR=$("$PG_BIN/postgres" --version | sed -E 's/.* ([0-9]+)[.a-z].*/\1/')
PORT=${PGSNOWFLAKE_PORT:-28815}
WORKER_ID=${PGSNOWFLAKE_WORKER_ID:-1}

as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

pick_dir() {
  mkdir -p target
  if [ "$(id -u)" -ne 0 ] || runuser -u postgres -- test -x "$PWD/target"; then
    echo "$PWD/target/run-pg$MAJOR"
  else
    echo "/tmp/pg_snowflake-run-pg$MAJOR"
  fi
}
DIR=$(pick_dir)
DATA=$DIR/data

# Every demo cluster, of any major, each with its own pg_ctl (a running server has the library
# mapped, so `make install` stops them before it overwrites it).
stop() {
  for d in "$PWD"/target/run-pg*/data /tmp/pg_snowflake-run-pg*/data; do
    if [ -f "$d/postmaster.pid" ]; then
      bin=$(dirname "$(readlink -f "/proc/$(head -1 "$d/postmaster.pid")/exe" 2>/dev/null || echo "$PG_BIN/postgres")")
      as_pg "$bin/pg_ctl" stop -D "$d" -m fast -w >/dev/null && echo "stopped the cluster in $d"
    fi
  done
}

case "${1:-start}" in
  stop) stop; exit 0 ;;
  start) ;;
  *) echo "usage: $0 [start|stop]" >&2; exit 2 ;;
esac

if [ ! -f "$DATA/PG_VERSION" ]; then
  mkdir -p "$DIR"
  [ "$(id -u)" -ne 0 ] || chown postgres:postgres "$DIR"
  as_pg "$PG_BIN/initdb" -A trust -U postgres -D "$DATA" >/dev/null
  cat >> "$DATA/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = ''
shared_preload_libraries = 'pg_snowflake'
snowflake.worker_id = $WORKER_ID
CONF
fi
if [ ! -f "$DATA/postmaster.pid" ]; then
  as_pg "$PG_BIN/pg_ctl" start -D "$DATA" -l "$DIR/server.log" -w >/dev/null
fi

PSQL=("$PG_BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -X -v ON_ERROR_STOP=1)
"${PSQL[@]}" -q <<'SQL'
CREATE EXTENSION IF NOT EXISTS pg_snowflake;
CREATE TABLE IF NOT EXISTS demo (
    id   bigint PRIMARY KEY DEFAULT snowflake_next(),
    note text NOT NULL
);
INSERT INTO demo (note) VALUES ('first'), ('second'), ('third');
SQL
"${PSQL[@]}" -c "SELECT id, note, (snowflake_decode(id)).* FROM demo ORDER BY id DESC LIMIT 6"
cat <<MSG
pg_snowflake is running (worker id $WORKER_ID, data in $DATA).
  connect: ${PSQL[*]:0:9}
  stop:    make stop
MSG
