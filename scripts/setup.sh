#!/usr/bin/env bash
# Installs what building, running and testing pg_snowflake needs for the PostgreSQL majors given
# as arguments (default: 15 17 18), and nothing that is already there: a second run takes about a
# second.
#   - Debian packages: the PostgreSQL 15 server and headers, libclang (bindgen), sudo (cargo pgrx
#     test --runas), libfaketime (clock-step tests), procps (pkill/pgrep for the crash tests),
#     node and npm (the JavaScript decoder test), pg_auto_failover for 15 (the failover test);
#     bison, flex, libssl and zlib headers to build 17 and 18
#   - PostgreSQL 17 (assert-enabled) and 18 from Debian's source packages, into
#     /opt/pg_snowflake/pgN (scripts/build-postgres.sh: about 6 minutes each, the first time)
#   - cargo-pgrx 0.18.1, the newest that builds with Rust 1.95 (about 7 minutes the first time)
#   - `cargo pgrx init` with every pg_config, never a downloaded PostgreSQL
#   - the npm packages of tests/js, from its package-lock.json
set -euo pipefail
cd "$(dirname "$0")/.."

MAJORS=("$@")
[ ${#MAJORS[@]} -gt 0 ] || MAJORS=(15 17 18)
PGRX_VERSION=0.18.1
PACKAGES=(postgresql-15 postgresql-server-dev-15 libclang-dev build-essential pkg-config sudo
          faketime libfaketime procps nodejs npm)
for v in "${MAJORS[@]}"; do
  [ "$v" = 15 ] || { PACKAGES+=(bison flex libssl-dev zlib1g-dev); break; }
done
for v in "${MAJORS[@]}"; do
  [ "$v" != 15 ] || PACKAGES+=(postgresql-15-auto-failover pg-auto-failover-cli)
done

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

for v in "${MAJORS[@]}"; do
  [ "$v" = 15 ] || scripts/build-postgres.sh "$v"
done

if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
  say "installing cargo-pgrx $PGRX_VERSION (about 7 minutes)"
  cargo install cargo-pgrx --version "=$PGRX_VERSION" --locked
fi

# Rewriting ~/.pgrx/config.toml forces a rebuild of pgrx-pg-sys: only init when a major is
# missing, and then with every major already there too (init forgets the ones it is not given).
config="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
args=(); new=()
for v in 15 17 18; do
  have=$(grep -qs "^pg$v = " "$config" && echo yes || true)
  want=$(printf '%s\n' "${MAJORS[@]}" | grep -qx "$v" && echo yes || true)
  [ -n "$want" ] && [ -z "$have" ] && new+=("$v")
  [ -n "$have$want" ] && args+=("--pg$v" "$(scripts/pg-config.sh "$v")")
done
if [ ${#new[@]} -gt 0 ]; then
  say "pointing pgrx at PostgreSQL ${new[*]}"
  cargo pgrx init "${args[@]}"
fi

if [ ! -d tests/js/node_modules/@sapphire/snowflake ]; then
  say "installing the JavaScript test decoder"
  npm ci --prefix tests/js --no-audit --no-fund --loglevel=error
fi
