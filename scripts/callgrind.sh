#!/usr/bin/env bash
# Instructions per snowflake_next(), counted by callgrind in a single-user backend: exact and
# repeatable (the same build gives the same count to the instruction, whatever else the machine
# does), so it tells a change of a few instructions on the hot path apart where timings cannot.
#
#   scripts/callgrind.sh            # the build installed into PG_CONFIG's server (default 15)
#   N=500000 scripts/callgrind.sh   # more ids per run
#   BASELINE=0.2.0 scripts/callgrind.sh --record   # that release too, and random() and nextval()
#                                   # for scale, written to docs/benchmarks.json (make bench-hotpath)
#   scripts/callgrind.sh --budget   # fails above the budget in scripts/hotpath-budget (make test)
#
# It runs `SELECT count(f) FROM generate_series(1, N)` once with f = snowflake_next() and once
# with count(*), and prints the difference divided by N: the cost of an id over an empty row.
# The function is declared straight from the library file (no CREATE EXTENSION), which the
# server preloads by that path, so that any build can be measured the same way.
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
single() { as_pg "$@" "$BIN/postgres" --single -D "$dir/data" postgres >/dev/null 2>&1; }

# count NAME EXPRESSION: instructions of `SELECT count(EXPRESSION)` over N rows.
count() {
  local out="$dir/callgrind.$1"
  echo "SELECT count($2) FROM generate_series(1, $N);" |
    single valgrind --tool=callgrind --callgrind-out-file="$out"
  sed -n 's/^summary: //p' "$out"
}

# measure LIBRARY LABEL: instructions per id of the library file LIBRARY, in a fresh cluster.
measure() {
  local so=$1 label=$2 empty ids
  rm -rf "$dir/data"
  as_pg "$BIN/initdb" -A trust -U postgres --no-sync -D "$dir/data" >/dev/null
  printf "shared_preload_libraries = '%s'\nsnowflake.worker_id = 1\n" "$so" >> "$dir/data/postgresql.conf"
  # One line: the single-user backend ends a statement at a newline.
  echo "CREATE FUNCTION snowflake_next() RETURNS bigint LANGUAGE c VOLATILE AS '$so', 'snowflake_next_wrapper';" | single
  empty=$(count empty '*')
  ids=$(count ids 'snowflake_next()')
  per_id "$label" "$ids" "$empty"
}

# per_id LABEL TOTAL EMPTY: prints the label's instructions per id and records it in $dir/results.
per_id() {
  awk -v a="$2" -v b="$3" -v n="$N" -v l="$1" \
    'BEGIN { printf "%s: %.1f instructions per id over an empty row (%d ids; %d and %d in all)\n", l, (a - b) / n, n, a, b }'
  awk -v a="$2" -v b="$3" -v n="$N" -v l="$1" 'BEGIN { printf "%s\t%.1f\n", l, (a - b) / n }' >> "$dir/results"
}

MODE=${1:-}
case "$MODE" in ""|--record|--budget) ;; *) echo "usage: $0 [--record|--budget]" >&2; exit 2 ;; esac
BUDGET_FILE=scripts/hotpath-budget
MAJOR=$("$BIN/postgres" --version | sed -E 's/.* ([0-9]+)[.a-z].*/\1/')
if [ "$MODE" = --budget ] && [ "$MAJOR" != 15 ]; then
  echo "$0: the budget is counted on PostgreSQL 15 (this is $MAJOR)" >&2; exit 2
fi
if [ -n "${BASELINE:-}" ]; then
  # That release's build, packaged from its commit in a worktree of its own, as
  # tests/packaging/package.rs does (and reused from there).
  [ "$BASELINE" = 0.2.0 ] || { echo "$0: only BASELINE=0.2.0 is known" >&2; exit 2; }
  commit=5c3df56f7c3d9bfe1bd344ba008ea50c7a974e1b  # as RELEASE_0_2_0 in tests/packaging/package.rs
  tree=target/package/release-$BASELINE
  [ -f "$tree/Cargo.toml" ] || git worktree add --force --detach "$tree" "$commit" >/dev/null
  base_so=target/package/postgresql-$MAJOR-pg-snowflake-$BASELINE-1/usr/lib/postgresql/$MAJOR/lib/pg_snowflake.so
  [ -f "$base_so" ] || scripts/package.sh "$PG_CONFIG" "$tree" >/dev/null
  cp "$base_so" "$dir/baseline.so"
  chmod 755 "$dir/baseline.so"
  measure "$dir/baseline.so" "$BASELINE"
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
measure "$("$PG_CONFIG" --pkglibdir)/pg_snowflake.so" "$version"

if [ "$MODE" = --record ]; then
  # For scale, in the last cluster: two functions of PostgreSQL's own.
  echo "CREATE SEQUENCE s;" | single
  empty=$(count empty '*')
  per_id "random()" "$(count random 'random()')" "$empty"
  per_id "nextval('s')" "$(count nextval "nextval('s')")" "$empty"
  # docs/benchmarks.json's hotpath, which the pages quote (tests/docs/readme.rs checks them).
  python3 - "$dir/results" "$("$BIN/postgres" --version | sed -E 's/^[^0-9]*([0-9.]+).*/\1/')" "$(git describe --always --dirty)" "$N" <<'PY'
import json, sys, datetime
results, server, commit, n = sys.argv[1:]
path = "docs/benchmarks.json"
try:
    data = json.load(open(path))
except FileNotFoundError:
    data = {}
data["hotpath"] = {
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    "postgresql": server,
    "commit": commit,
    "ids": int(n),
    "instructions_per_id": {l.split("\t")[0]: float(l.split("\t")[1]) for l in open(results)},
}
open(path, "w").write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
print(f"recorded in {path}")
PY
fi

if [ "$MODE" = --budget ]; then
  budget=$(grep -v '^#' "$BUDGET_FILE" | grep -m1 .)
  cost=$(awk -F'\t' -v l="$version" '$1 == l { print $2 }' "$dir/results")
  if awk -v c="$cost" -v b="$budget" 'BEGIN { exit !(c > b) }'; then
    echo "the hot path costs $cost instructions per id, over the budget of $budget ($BUDGET_FILE):" >&2
    echo "make it cheaper, or raise the budget in the same commit and say why in its message" >&2
    exit 1
  fi
  echo "the hot path costs $cost instructions per id, within the budget of $budget ($BUDGET_FILE)"
fi
