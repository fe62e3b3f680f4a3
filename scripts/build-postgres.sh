#!/usr/bin/env bash
# Builds one PostgreSQL major from Debian's source package into /opt/pg_snowflake/pgMAJOR, for the
# majors that Debian 12 has no binary package of. Skips everything when that prefix already holds
# a build of the same source with the same configure flags.
#
#   scripts/build-postgres.sh 17    # 17 from trixie, --enable-cassert --enable-debug
#   scripts/build-postgres.sh 18    # 18 from sid, --with-openssl, no assertions
#
# Why these flags:
# - 17 with assertions: pgrx develops against assert-enabled servers, which check at run time
#   how an extension uses PostgreSQL's internals (lock and interrupt rules, memory contexts).
#   A production build accepts such misuse silently.
# - 18 as distributions build it: `make bench` compares against uuidv7() and
#   gen_random_uuid(), which are only as fast as a distribution's when OpenSSL supplies their
#   randomness (without it they read /dev/urandom on every call: 4.6 us per uuid).
# - No ICU, no readline: neither is needed by the tests, and each is one package less.
# A build takes 5-6 minutes on 2 cores.
set -euo pipefail

MAJOR=${1:?usage: $0 MAJOR}
PREFIX=${PG_SNOWFLAKE_PG_ROOT:-/opt/pg_snowflake}/pg$MAJOR
case "$MAJOR" in
  17) SUITE=trixie; FLAGS=(--enable-cassert --enable-debug) ;;
  18) SUITE=sid; FLAGS=(--with-openssl) ;;
  *) echo "$0: no recipe for PostgreSQL $MAJOR (15 comes from Debian's packages)" >&2; exit 2 ;;
esac
FLAGS+=(--without-icu --without-readline --prefix="$PREFIX")

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo

# A deb-src entry for the suite that carries this major. Binary packages are not affected:
# Types is deb-src only.
SOURCES=/etc/apt/sources.list.d/pg-snowflake-src.sources
if ! grep -qs "^Suites:.*\b$SUITE\b" "$SOURCES"; then
  say "adding a deb-src entry for Debian $SUITE (PostgreSQL $MAJOR source)"
  suites=$(sed -n 's/^Suites: //p' "$SOURCES" 2>/dev/null || true)
  $SUDO tee "$SOURCES" >/dev/null <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $(echo "$suites $SUITE" | xargs)
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  $SUDO apt-get update -qq
fi

version=$(apt-cache showsrc "postgresql-$MAJOR" 2>/dev/null | sed -n 's/^Version: //p' | head -1)
if [ -z "$version" ]; then
  $SUDO apt-get update -qq
  version=$(apt-cache showsrc "postgresql-$MAJOR" | sed -n 's/^Version: //p' | head -1)
fi
[ -n "$version" ] || { echo "$0: no source package postgresql-$MAJOR in $SUITE" >&2; exit 1; }
upstream=${version%%-*}
STAMP="$PREFIX/pg_snowflake-build"
want="postgresql-$MAJOR $upstream ${FLAGS[*]}"
if [ -x "$PREFIX/bin/pg_config" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  exit 0
fi

say "building PostgreSQL $upstream (${FLAGS[*]}) into $PREFIX, about 6 minutes"
work=$(mktemp -d /tmp/pg_snowflake-build-pg$MAJOR.XXXXXX)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get source --download-only -qq "postgresql-$MAJOR=$version" 2>/dev/null)
tar -xf "$work"/postgresql-"$MAJOR"_"$upstream".orig.tar.* -C "$work"
src="$work/postgresql-$upstream"
(
  cd "$src"
  ./configure --quiet "${FLAGS[@]}" >/dev/null
  make -s -j"$(nproc)" >/dev/null
  $SUDO rm -rf "$PREFIX"
  $SUDO make -s install >/dev/null
)
echo "$want" | $SUDO tee "$STAMP" >/dev/null
say "PostgreSQL $upstream is in $PREFIX"
