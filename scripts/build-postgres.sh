#!/usr/bin/env bash
# Installs one PostgreSQL major that Debian 12 does not package into /opt/pg_snowflake/pgMAJOR,
# from a pinned release whose sha256 is checked before anything is built or unpacked (see
# scripts/postgres-versions: the releases, their checksums, and how to bump one). Does nothing
# when that prefix already holds a build of a listed release with the same flags.
#
#   scripts/build-postgres.sh 16    # 16.2 from the pgserver wheel on PyPI (no assertions)
#   scripts/build-postgres.sh 17    # 17 from source, --enable-cassert --enable-debug
#   scripts/build-postgres.sh 18    # 18 from source, --with-openssl, no assertions
#
# Why these flags:
# - 17 with assertions: pgrx develops against assert-enabled servers, which check at run time
#   how an extension uses PostgreSQL's internals (lock and interrupt rules, memory contexts).
#   A production build accepts such misuse silently.
# - 18 as distributions build it: `make bench` compares against uuidv7() and
#   gen_random_uuid(), which are only as fast as a distribution's when OpenSSL supplies their
#   randomness (without it they read /dev/urandom on every call: 4.6 us per uuid).
# - No ICU, no readline: neither is needed by the tests, and each is one package less.
# A source build takes 5-6 minutes on 2 cores; the wheel, seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

# PostgreSQL's makefiles generate headers (utils/errcodes.h, ...) only at make level 0: run
# from `make test` (MAKELEVEL=1) its build stopped at once. Nothing here is part of our make.
unset MAKELEVEL MAKEFLAGS MFLAGS

MAJOR=${1:?usage: $0 MAJOR}
PREFIX=${PG_SNOWFLAKE_PG_ROOT:-/opt/pg_snowflake}/pg$MAJOR
MIRROR=${PG_SNOWFLAKE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
case "$MAJOR" in
  16) FLAGS=(wheel) ;;
  17) FLAGS=(--enable-cassert --enable-debug) ;;
  18) FLAGS=(--with-openssl) ;;
  *) echo "$0: no recipe for PostgreSQL $MAJOR (15 comes from Debian's packages)" >&2; exit 2 ;;
esac
[ "$MAJOR" = 16 ] || FLAGS+=(--without-icu --without-readline --prefix="$PREFIX")

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo

# The listed releases of this major, newest first: "version sha256 source" per line.
# PG_SNOWFLAKE_VERSIONS names another list (the tests of this script use one).
VERSIONS=${PG_SNOWFLAKE_VERSIONS:-scripts/postgres-versions}
mapfile -t RELEASES < <(awk -v m="$MAJOR" '$1 == m { print $2, $3, $4 }' "$VERSIONS")
[ ${#RELEASES[@]} -gt 0 ] || { echo "$0: $VERSIONS lists no release of PostgreSQL $MAJOR" >&2; exit 2; }

# The stamp says which release was installed, with which flags. Any listed release will do:
# a warm run does not rebuild because a newer one was listed, nor fail because the one it has
# can no longer be downloaded.
STAMP="$PREFIX/pg_snowflake-build"
if [ -f "$STAMP" ]; then
  read -r _ built_version built_flags < "$STAMP" || true
  for r in "${RELEASES[@]}"; do
    if [ "${r%% *}" = "$built_version" ] && [ "$built_flags" = "${FLAGS[*]}" ] \
       && [ -x "$(scripts/pg-config.sh "$MAJOR")" ]; then
      exit 0
    fi
  done
fi

work=$(mktemp -d "/tmp/pg_snowflake-build-pg$MAJOR.XXXXXX")
trap 'rm -rf "$work"' EXIT

# fetch VERSION SHA256 SOURCE: downloads the release into $work and checks its sha256; on
# failure appends what came back to $tried and returns 1.
tried=(); archive=; where=
fetch() {
  local version=$1 sha=$2 source=$3 file got
  case "$source" in
    debian)
      local url="$MIRROR/pool/main/p/postgresql-$MAJOR/postgresql-${MAJOR}_$version.orig.tar.bz2"
      file="$work/postgresql-$version.tar.bz2"
      if ! got=$(curl -sS -L -o "$file" -w '%{http_code}' "$url" 2>&1) || [ "$got" != 200 ]; then
        [[ "$got" =~ ^[0-9]{3}$ ]] && got="HTTP $got"
        tried+=("$url: ${got:-no answer}"); return 1
      fi
      where=$url ;;
    pypi:*)
      local spec=${source#pypi:}; local package=${spec%:*}; local wheel=${spec##*:}
      local pyver; pyver=$(sed -E 's/.*-cp([0-9])([0-9]+)-.*/\1.\2/' <<< "$wheel")
      if ! got=$(python3 -m pip download --quiet --no-deps --only-binary=:all: \
            --platform manylinux2014_x86_64 --python-version "$pyver" --implementation cp \
            -d "$work" "$package" 2>&1) || [ ! -f "$work/$wheel" ]; then
        tried+=("PyPI $package ($wheel): ${got:-the wheel did not arrive}"); return 1
      fi
      file="$work/$wheel"; where="PyPI $package" ;;
    *) echo "$0: unknown source $source in $VERSIONS" >&2; exit 2 ;;
  esac
  got=$(sha256sum "$file" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    tried+=("$where: sha256 $got, expected $sha"); rm -f "$file"; return 1
  fi
  archive=$file
}

version=
for r in "${RELEASES[@]}"; do
  read -r v sha source <<< "$r"
  say "downloading PostgreSQL $v"
  if fetch "$v" "$sha" "$source"; then version=$v; break; fi
done
if [ -z "$version" ]; then
  {
    echo "$0: none of the listed PostgreSQL $MAJOR releases could be had:"
    printf '  %s\n' "${tried[@]}"
    echo "Add a release that can be downloaded to $VERSIONS (see its header)."
  } >&2
  exit 1
fi

if [ "$MAJOR" = 16 ]; then
  # The wheel is a zip: PostgreSQL under pgserver/pginstall (bin, lib, include, share), its
  # libpq under pgserver.libs, which the binaries find relative to themselves.
  say "installing PostgreSQL $version from the wheel into $PREFIX"
  python3 -m zipfile -e "$archive" "$work/wheel"
  $SUDO rm -rf "$PREFIX"
  $SUDO mkdir -p "$PREFIX"
  $SUDO cp -a "$work/wheel/pgserver" "$work/wheel/pgserver.libs" "$PREFIX/"
  # zipfile drops the execute bits.
  $SUDO chmod -R a+rX "$PREFIX"
  $SUDO chmod a+x "$PREFIX"/pgserver/pginstall/bin/* "$PREFIX"/pgserver.libs/*
else
  say "building PostgreSQL $version (${FLAGS[*]}) into $PREFIX, about 6 minutes"
  tar -xjf "$archive" -C "$work"
  (
    cd "$work/postgresql-$version"
    ./configure --quiet "${FLAGS[@]}" >/dev/null
    make -s -j"$(nproc)" >/dev/null
    $SUDO rm -rf "$PREFIX"
    $SUDO make -s install >/dev/null
  )
fi
echo "postgresql-$MAJOR $version ${FLAGS[*]}" | $SUDO tee "$STAMP" >/dev/null
"$(scripts/pg-config.sh "$MAJOR")" --version >/dev/null
say "PostgreSQL $version is in $PREFIX"
