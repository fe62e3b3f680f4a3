#!/usr/bin/env bash
# The pg_config of a PostgreSQL major as this project installs it, laid out as Debian's
# packages: 15 from Debian, the others by scripts/build-postgres.sh (16-old: see there).
set -euo pipefail
case "${1:?usage: $0 MAJOR}" in
  # 16.2, for the synchronous-standby flag format from before May 2025 (scripts/build-postgres.sh)
  16-old) echo /opt/pg_snowflake-tests/postgresql-16-old/pgserver/pginstall/bin/pg_config ;;
  *) echo "/usr/lib/postgresql/$1/bin/pg_config" ;;
esac
