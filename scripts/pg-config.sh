#!/usr/bin/env bash
# The pg_config of a PostgreSQL major as this project installs it: 15 from Debian's packages,
# the others by scripts/build-postgres.sh (16 from a wheel, which keeps its own layout).
set -euo pipefail
root=${PG_SNOWFLAKE_PG_ROOT:-/opt/pg_snowflake}
case "${1:?usage: $0 MAJOR}" in
  15) echo /usr/lib/postgresql/15/bin/pg_config ;;
  16) echo "$root/pg16/pgserver/pginstall/bin/pg_config" ;;
  *) echo "$root/pg$1/bin/pg_config" ;;
esac
