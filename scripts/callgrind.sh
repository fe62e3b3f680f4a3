#!/usr/bin/env bash
# Instructions per snowflake_next(), counted by callgrind in a single-user backend: exact and
# repeatable (the same build gives the same count to the instruction, whatever else the machine
# does), so it tells a change of a few instructions on the hot path apart where timings cannot.
#
#   scripts/callgrind.sh            # the build installed into PG_CONFIG's server (default 15)
#   N=500000 scripts/callgrind.sh   # more ids per run
#
# It runs `SELECT count(f) FROM generate_series(1, N)` once with f = snowflake_next() and once
# with count(*), and prints the difference divided by N: the cost of an id over an empty row.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_CONFIG=${PG_CONFIG:-$(scripts/pg-config.sh "${PG:-15}")}
N=${N:-200000}
BIN=$("$PG_CONFIG" --bindir)
command -v valgrind >/dev/null || { echo "$0: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }

dir=$(mktemp -d /tmp/pg_snowflake-callgrind.XXXXXX)
trap 'rm -rf "$dir"' EXIT
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" -ne 0 ] || chown postgres:postgres "$dir"
as_pg "$BIN/initdb" -A trust -U postgres --no-sync -D "$dir/data" >/dev/null
cat >> "$dir/data/postgresql.conf" <<EOF
shared_preload_libraries = 'pg_snowflake'
snowflake.worker_id = 1
EOF
single() { as_pg "$@" "$BIN/postgres" --single -D "$dir/data" postgres >/dev/null 2>&1; }
echo "CREATE EXTENSION pg_snowflake;" | single

count() {
  local out="$dir/callgrind.$1"
  echo "SELECT count($2) FROM generate_series(1, $N);" |
    single valgrind --tool=callgrind --callgrind-out-file="$out"
  sed -n 's/^summary: //p' "$out"
}
empty=$(count empty '*')
ids=$(count ids 'snowflake_next()')
awk -v a="$ids" -v b="$empty" -v n="$N" \
  'BEGIN { printf "%.1f instructions per id over an empty row (%d ids; %d and %d in all)\n", (a - b) / n, n, a, b }'
