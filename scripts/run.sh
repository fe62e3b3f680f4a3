#!/usr/bin/env bash
# `make run`: a throwaway cluster with pg_snowflake preloaded, a demo table, and the command to
# connect. `make run-cluster` (scripts/run.sh cluster): three shards and a hub subscribed to all
# of them through logical replication, as in docs/many-servers.md, every one of them leasing its
# worker id from the registry in the hub. `make stop` (scripts/run.sh stop) stops all of them.
# Assumes `make install` has run.
#
# The clusters of major N live in target/run-pgN when the postgres user can reach it
# (PostgreSQL refuses to run as root), else in /tmp/pg_snowflake-run-pgN (a checkout under /root
# is closed to postgres); PGSNOWFLAKE_RUN_DIR names another directory (the tests do).
#
# They trust every connection, so they take none from the network: each listens on a unix
# socket only, in DIR/sockets, a directory only its owner (postgres, or you when not root) may
# enter, as port 28815 (the demo), 28820 (the hub) and 28821-28823 (the shards). You reach them
# as root or as that owner: the connect lines printed say how. (0.5.0's demo listened on
# 127.0.0.1 with trust: any local user was its superuser, and ran programs as postgres with
# COPY ... TO PROGRAM.)
set -euo pipefail
cd "$(dirname "$0")/.."

PG_BIN=$("${PG_CONFIG:-pg_config}" --bindir)
MAJOR=$("$PG_BIN/postgres" --version | sed -E 's/.* ([0-9]+)[.a-z].*/\1/')
PORT=${PGSNOWFLAKE_PORT:-28815}
WORKER_ID=${PGSNOWFLAKE_WORKER_ID:-1}

as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

pick_dir() {
  if [ -n "${PGSNOWFLAKE_RUN_DIR:-}" ]; then echo "$PGSNOWFLAKE_RUN_DIR"; return; fi
  mkdir -p target
  if [ "$(id -u)" -ne 0 ] || runuser -u postgres -- test -x "$PWD/target"; then
    echo "$PWD/target/run-pg$MAJOR"
  else
    echo "/tmp/pg_snowflake-run-pg$MAJOR"
  fi
}
DIR=$(pick_dir)
SOCKETS=$DIR/sockets

# Every cluster of every major that `start` made, each stopped with its own pg_ctl (a running
# server has the library mapped, so `make install` stops them before it overwrites it).
stop() {
  for d in "$PWD"/target/run-pg*/*/data /tmp/pg_snowflake-run-pg*/*/data \
           "$PWD"/target/run-pg*/data /tmp/pg_snowflake-run-pg*/data \
           ${PGSNOWFLAKE_RUN_DIR:+"$PGSNOWFLAKE_RUN_DIR"/*/data}; do
    if [ -f "$d/postmaster.pid" ]; then
      pid=$(head -1 "$d/postmaster.pid")
      # Only a server running in that very directory, with its own pg_ctl: under /tmp, anyone
      # could have left a postmaster.pid naming another server.
      [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$(readlink -f "$d")" ] || continue
      bin=$(dirname "$(readlink -f "/proc/$pid/exe" 2>/dev/null || echo "$PG_BIN/postgres")")
      [ "$(stat -c %U "$bin/pg_ctl" 2>/dev/null)" = root ] || [ "$(id -u)" -ne 0 ] || continue
      as_pg "$bin/pg_ctl" stop -D "$d" -m fast -w >/dev/null && echo "stopped the cluster in $d"
    fi
  done
}

# The lines every cluster ends its postgresql.conf with (later lines win, also over a cluster
# that an older run.sh made listening on 127.0.0.1).
ACCESS="# make run: a unix socket in $SOCKETS only, no TCP"

# start NAME PORT [postgresql.conf lines...]: initdb once, then start if it is not running.
start() {
  local name=$1 port=$2; shift 2
  local data=$DIR/$name/data
  # Also when the cluster exists: under /tmp, another user could have made it.
  scripts/own-dir.sh "$DIR" "$DIR/$name" "$SOCKETS"
  # Only its owner (and root) may enter the socket directory: nobody else reaches a socket
  # in it, whatever the socket's own mode.
  as_pg chmod 0700 "$SOCKETS"
  if [ -e "$data" ] && [ "$(stat -c %U "$data")" != "$(as_pg id -un)" ]; then
    echo "$0: $data does not belong to $(as_pg id -un); remove it and run again" >&2; exit 1
  fi
  if [ ! -f "$data/PG_VERSION" ]; then
    as_pg "$PG_BIN/initdb" --auth-local=trust --auth-host=reject -U postgres -D "$data" >/dev/null
    {
      echo "port = $port"
      echo "shared_preload_libraries = 'pg_snowflake'"
      printf '%s\n' "$@"
    } | as_pg tee -a "$data/postgresql.conf" >/dev/null
  fi
  # mutant: demo_socket_only
  # mutant: demo_socket_dir
  if ! as_pg grep -qxF "$ACCESS" "$data/postgresql.conf"; then
    {
      echo "$ACCESS"
      echo "listen_addresses = ''"
      echo "unix_socket_directories = '$SOCKETS'"
      echo "unix_socket_permissions = 0700"
    } | as_pg tee -a "$data/postgresql.conf" >/dev/null
  fi
  if [ ! -f "$data/postmaster.pid" ]; then
    as_pg "$PG_BIN/pg_ctl" start -D "$data" -l "$DIR/$name/server.log" -w >/dev/null
  fi
}

psql_on() {
  local port=$1; shift
  # Quiet about IF NOT EXISTS on a second run.
  PGOPTIONS='-c client_min_messages=warning' \
    "$PG_BIN/psql" -h "$SOCKETS" -p "$port" -U postgres -d postgres -X -v ON_ERROR_STOP=1 "$@"
}

demo() {
  start demo "$PORT" "snowflake.worker_id = $WORKER_ID"
  psql_on "$PORT" -q <<'SQL'
CREATE EXTENSION IF NOT EXISTS pg_snowflake;
CREATE TABLE IF NOT EXISTS demo (
    id   bigint PRIMARY KEY DEFAULT snowflake_next(),
    note text NOT NULL
);
INSERT INTO demo (note) VALUES ('first'), ('second'), ('third');
SQL
  psql_on "$PORT" -c "SELECT id, note, (snowflake_decode(id)).* FROM demo ORDER BY id DESC LIMIT 6"
  cat <<MSG
pg_snowflake is running (worker id $WORKER_ID, data in $DIR/demo/data).
  connect: $PG_BIN/psql -h $SOCKETS -p $PORT -U postgres
  stop:    make stop
MSG
}

# Three shards and a hub, named as in docs/many-servers.md ("Consolidating with logical
# replication"): the shards publish their orders and their worker id claims; the hub subscribes
# to each (once) and shows what arrived.
#
# The hub runs one apply worker per shard and, while a subscription copies its tables, up to
# max_sync_workers_per_subscription (2) table-sync workers more: 3 per shard at first, which the
# default of 4 logical replication workers cannot hold for three shards (the hub then logs "out
# of logical replication worker slots" and catches up late). Each of those is a background
# worker besides the launcher, the claims worker and parallel query's.
#
# Polls (at most 30 s) until the server on PORT has leased a worker id from the registry.
wait_for_lease() {
  local port=$1
  for _ in $(seq 60); do
    psql_on "$port" -Atc "SELECT snowflake_next()" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  psql_on "$port" -Atc "SELECT snowflake_next()"
}

cluster() {
  local hub=28820 shards=3
  local claims=("snowflake.claims_database = 'postgres'" "snowflake.claims_interval = 2")
  # The hub holds the registry, and leases its own worker id from it like the shards.
  local registry="snowflake.registry = 'host=$SOCKETS port=$hub dbname=postgres user=fleet'"
  start hub $hub "cluster_name = 'hub'" "$registry" "${claims[@]}" \
    "max_logical_replication_workers = $((shards * 3))" \
    "max_worker_processes = $((shards * 3 + 10))"
  psql_on $hub -q <<'SQL'
CREATE EXTENSION IF NOT EXISTS pg_snowflake;
DO $$ BEGIN CREATE ROLE fleet LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_hold TO fleet;
CREATE TABLE IF NOT EXISTS orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), item text NOT NULL);
SQL
  wait_for_lease $hub
  for i in $(seq "$shards"); do
    local port=$((28820 + i))
    start "shard-$i" $port "wal_level = logical" "cluster_name = 'shard-$i'" \
      "$registry" "${claims[@]}"
    psql_on $port -qc "CREATE EXTENSION IF NOT EXISTS pg_snowflake"
    wait_for_lease $port
    psql_on $port -q <<SQL
CREATE TABLE IF NOT EXISTS orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), item text NOT NULL);
INSERT INTO orders (item) SELECT 'order ' || g || ' of shard-$i' FROM generate_series(1, 3) g;
SQL
    [ "$(psql_on $port -Atc "SELECT count(*) FROM pg_publication WHERE pubname = 'to_hub'")" = 1 ] ||
      psql_on $port -qc "CREATE PUBLICATION to_hub FOR TABLE orders, snowflake.snowflake_claims"
    [ "$(psql_on $hub -Atc "SELECT count(*) FROM pg_subscription WHERE subname = 'from_shard_$i'")" = 1 ] ||
      psql_on $hub -qc "CREATE SUBSCRIPTION from_shard_$i
                        CONNECTION 'host=$SOCKETS port=$port dbname=postgres' PUBLICATION to_hub" 2>&1 |
      grep -v 'created replication slot' || true
  done
  # Logical replication is asynchronous: wait (at most 30 s) for the rows just inserted and for
  # every shard's claim.
  local want
  want=$(( $(for i in $(seq "$shards"); do psql_on $((28820 + i)) -Atc "SELECT count(*) FROM orders"; done | paste -sd+) ))
  for _ in $(seq 60); do
    [ "$(psql_on $hub -Atc "SELECT count(*) FROM orders")" -ge "$want" ] &&
      [ "$(psql_on $hub -Atc "SELECT count(*) FROM snowflake.snowflake_claims")" -ge $((shards + 1)) ] && break
    sleep 0.5
  done
  psql_on $hub -c "SELECT item, (snowflake_decode(id)).worker_id FROM orders ORDER BY id DESC LIMIT 9"
  psql_on $hub -c "SELECT node_name, worker_id, expires FROM snowflake.snowflake_registry ORDER BY worker_id"
  psql_on $hub -c "SELECT node_name, worker_id, last_seen FROM snowflake.snowflake_claims ORDER BY worker_id"
  psql_on $hub -c "SELECT count(*) AS ongoing_clashes FROM snowflake.snowflake_clashes WHERE ongoing"
  cat <<MSG
Three shards replicate to a hub, whose registry leased every worker id (data in $DIR).
  shards: $PG_BIN/psql -h $SOCKETS -p 28821 (28822, 28823) -U postgres
  hub:    $PG_BIN/psql -h $SOCKETS -p $hub -U postgres
  stop:   make stop
MSG
}

case "${1:-start}" in
  stop) stop ;;
  start) demo ;;
  cluster) cluster ;;
  *) echo "usage: $0 [start|cluster|stop]" >&2; exit 2 ;;
esac
