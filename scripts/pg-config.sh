#!/usr/bin/env bash
# The pg_config of a PostgreSQL major as this project installs it: 15 from Debian's packages,
# the others built by scripts/build-postgres.sh.
set -euo pipefail
case "${1:?usage: $0 MAJOR}" in
  15) echo /usr/lib/postgresql/15/bin/pg_config ;;
  *) echo "${PG_SNOWFLAKE_PG_ROOT:-/opt/pg_snowflake}/pg$1/bin/pg_config" ;;
esac
