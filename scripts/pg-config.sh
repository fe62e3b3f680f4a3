#!/usr/bin/env bash
# The pg_config of a PostgreSQL major as this project installs it, laid out as Debian's
# packages: 15 from Debian, the others by scripts/build-postgres.sh.
set -euo pipefail
echo "/usr/lib/postgresql/${1:?usage: $0 MAJOR}/bin/pg_config"
