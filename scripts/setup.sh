#!/usr/bin/env bash
# Installs what building, running and testing pg_snowflake needs, and nothing that is already
# there: a second run takes about a second.
#   - Debian packages: the PostgreSQL 15 server and headers, libclang (bindgen), sudo (cargo pgrx
#     test --runas), libfaketime (clock-step tests), procps (pkill/pgrep for the crash tests),
#     node and npm (the JavaScript decoder test)
#   - cargo-pgrx 0.18.1, the newest that builds with Rust 1.95 (about 7 minutes the first time)
#   - `cargo pgrx init --pg15` against the system pg_config, never a downloaded PostgreSQL
#   - the npm packages of tests/js, from its package-lock.json
set -euo pipefail
cd "$(dirname "$0")/.."

PGRX_VERSION=0.18.1
PG_MAJOR=15
PG_CONFIG_PG15=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
PACKAGES=(postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libclang-dev build-essential
          pkg-config sudo faketime libfaketime procps nodejs npm)

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm may come from elsewhere than Debian (this machine has them under /usr/local).
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
read -r -a missing <<< "${missing[*]}"
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
  say "installing cargo-pgrx $PGRX_VERSION (about 7 minutes)"
  cargo install cargo-pgrx --version "=$PGRX_VERSION" --locked
fi

# Rewriting ~/.pgrx/config.toml forces a rebuild of pgrx-pg-sys: only init when pg15 is missing.
if ! grep -qs "^pg$PG_MAJOR = " "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
  say "pointing pgrx at the system PostgreSQL $PG_MAJOR"
  cargo pgrx init --pg$PG_MAJOR "$PG_CONFIG_PG15"
fi

if [ ! -d tests/js/node_modules/@sapphire/snowflake ]; then
  say "installing the JavaScript test decoder"
  npm ci --prefix tests/js --no-audit --no-fund --loglevel=error
fi
