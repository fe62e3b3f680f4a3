#!/usr/bin/env bash
# Installs the SQL scripts that `cargo pgrx install` does not write, next to the install script
# it generated for the current version (in EXTENSION_DIR if set, as a package is staged; else in
# the extension directory of PG_CONFIG's server):
#   - the upgrade scripts of sql/upgrade/, with their includes expanded (scripts/sql-upgrades.py)
#   - the install scripts of earlier releases (sql/pg_snowflake--X.Y.Z.sql), so that an earlier
#     version can be created and then updated (tests/packaging/extension_upgrade.rs does)
# and, with --lint, checks every pg_snowflake script there with pgspot (see below).
#
#   scripts/install-sql.sh PG_CONFIG [--lint]
set -euo pipefail
cd "$(dirname "$0")/.."
PG_CONFIG=${1:?usage: $0 PG_CONFIG [--lint]}
ext=${EXTENSION_DIR:-$("$PG_CONFIG" --sharedir)/extension}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
SUDO=; [ -w "$ext" ] || SUDO=sudo

out=target/sql
rm -rf "$out" && mkdir -p "$out"
python3 scripts/sql-upgrades.py "$ext/pg_snowflake--$version.sql" "$out"
for f in sql/pg_snowflake--*.sql; do
  case "$f" in *--*--*) ;; *) cp "$f" "$out/" ;; esac
done
$SUDO install -m 644 "$out"/pg_snowflake--*.sql "$ext/"

[ "${2:-}" = --lint ] || exit 0
# pgspot (Timescale's linter for extension scripts) on every install and upgrade script,
# generated ones included: no finding may be left. The upgrade scripts (those made from
# templates, and their released expansions in sql/) replace the extension's own objects with
# CREATE OR REPLACE (PS002 functions, PS015 views),
# which pgspot cannot tell from replacing another role's object in an insecure schema;
# PostgreSQL refuses to replace an object that is not a member of the extension during an
# extension script (since the fix of CVE-2022-2625), so those two are ignored there, and only
# there.
PGSPOT=target/venv/bin/pgspot
[ -x "$PGSPOT" ] || { echo "$0: $PGSPOT is missing: run scripts/setup.sh test" >&2; exit 1; }
status=0
for f in "$ext"/pg_snowflake--*.sql; do
  ignore=()
  case "$(basename "$f")" in *--*--*) ignore=(--ignore PS002 --ignore PS015) ;; esac
  report=$("$PGSPOT" "${ignore[@]}" "$f")
  if ! grep -q "Errors: 0 Warnings: 0 Unknown: 0" <<< "$report"; then
    printf 'pgspot: %s\n%s\n' "$f" "$report" >&2
    status=1
  fi
done
[ $status = 0 ] && echo "pgspot: no findings in $(ls "$ext"/pg_snowflake--*.sql | wc -l) scripts"
exit $status
