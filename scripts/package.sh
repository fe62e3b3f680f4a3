#!/usr/bin/env bash
# Builds the Debian package of pg_snowflake for one PostgreSQL major, laid out as the PostgreSQL
# packages of Debian and PGDG lay out an extension:
#
#   target/package/postgresql-N-pg-snowflake_<version>-1_amd64.deb
#     /usr/lib/postgresql/N/lib/pg_snowflake.so
#     /usr/share/postgresql/N/extension/pg_snowflake.control, pg_snowflake--*.sql (the install
#       script of this release and of every earlier one, and every upgrade script)
#     /usr/share/doc/postgresql-N-pg-snowflake/copyright, changelog.Debian.gz, changelog.gz
#   Depends: postgresql-N and the C libraries the library links
#
#   scripts/package.sh PG_CONFIG                # this checkout's release
#   scripts/package.sh PG_CONFIG SOURCE_DIR     # another checkout's (an earlier release, for
#                                                 the tests of upgrading the package)
#
# The files go to Debian's directories whatever PG_CONFIG's are; the tests install the package
# into servers laid out as Debian's (scripts/build-postgres.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# A build with PG_SNOWFLAKE_MUTANT set has a guard removed (core/src/mutant.rs): never a package.
[ -z "${PG_SNOWFLAKE_MUTANT:-}" ] || { echo "$0: PG_SNOWFLAKE_MUTANT=$PG_SNOWFLAKE_MUTANT removes a guard: unset it" >&2; exit 1; }
# The build's toolchain and link (the Makefile sets the same).
. scripts/build-env.sh
root=$PWD
PG_CONFIG=$(command -v "${1:?usage: $0 PG_CONFIG [SOURCE_DIR]}")
src=$(cd "${2:-.}" && pwd)

major=$("$PG_CONFIG" --version | sed -nE 's/^PostgreSQL ([0-9]+).*/\1/p')
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$src/Cargo.toml" | head -1)
package=postgresql-$major-pg-snowflake
deb_version=$version-1
deb=target/package/${package}_${deb_version}_amd64.deb
stage=$root/target/package/$package-$deb_version
build=$root/target/package/build-pg$major-$version
rm -rf "$stage" "$build"
mkdir -p "$stage/DEBIAN" "$build"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
say "building $package $deb_version"

lib=$stage/usr/lib/postgresql/$major/lib
ext=$stage/usr/share/postgresql/$major/extension
mkdir -p "$ext"
if [ "$src" = "$root" ]; then
  # This release: the library and the SQL that cargo pgrx generates, under pg_config's
  # directories.
  cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$build" >/dev/null
  install -D -m 644 "$build$("$PG_CONFIG" --pkglibdir)/pg_snowflake.so" "$lib/pg_snowflake.so"
  install -m 644 "$build$("$PG_CONFIG" --sharedir)"/extension/pg_snowflake* "$ext/"
  # The upgrade scripts made from templates and the install scripts of earlier releases, as
  # `make install` adds them.
  EXTENSION_DIR=$ext scripts/install-sql.sh "$PG_CONFIG"
else
  # An earlier release, only installed to be upgraded: its library, built by plain cargo with
  # the pgrx its Cargo.lock pins (this release's cargo-pgrx refuses another pgrx version), with
  # the mutation profile (optimised, no LTO: minutes less) and a target directory of its own
  # (in a shared one, a build of this tree with the same profile left its library where the old
  # release's was taken from: the 0.2.0 package then held 0.3.0's functions). Its SQL scripts
  # are the ones it shipped, as sql/ keeps them (a released script never changes): the install
  # script of each release up to it, and each upgrade step up to it.
  target=$root/target/package/target-$version
  (cd "$src" && CARGO_TARGET_DIR=$target PGRX_PG_CONFIG_PATH=$PG_CONFIG \
     cargo build --lib --profile mutation --no-default-features --features "pg$major" >/dev/null)
  install -D -m 644 "$target/mutation/libpg_snowflake.so" "$lib/pg_snowflake.so"
  sed "s/@CARGO_VERSION@/$version/" "$src/pg_snowflake.control" > "$ext/pg_snowflake.control"
  at_most() { [ "$(printf '%s\n%s\n' "$1" "$version" | sort -V | tail -1)" = "$version" ]; }
  for f in "$root"/sql/pg_snowflake--*.sql; do
    step=$(basename "$f" .sql); step=${step#pg_snowflake--}
    if at_most "${step##*--}"; then install -m 644 "$f" "$ext/"; fi
  done
  [ -f "$ext/pg_snowflake--$version.sql" ] ||
    { echo "$0: sql/ has no install script of $version" >&2; exit 1; }
fi
# Debug information stays out of the package (lintian: unstripped-binary-or-object).
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$lib/pg_snowflake.so"
chmod 644 "$ext"/*

# Documentation: the copyright in Debian's machine-readable format, and the changelogs.
doc=$stage/usr/share/doc/$package
mkdir -p "$doc"
{
  echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
  echo "Upstream-Name: pg_snowflake"
  echo
  echo "Files: *"
  echo "Copyright: 2026 the pg_snowflake authors"
  echo "License: PostgreSQL"
  sed -n '3,$p' "$root/LICENSE" | sed -e 's/^$/./' -e 's/^/ /'
} > "$doc/copyright"
date=$(date -R -d "@$(git -C "$src" log -1 --format=%ct 2>/dev/null || date +%s)")
{
  echo "$package ($deb_version) unstable; urgency=medium"
  echo
  echo "  * pg_snowflake $version for PostgreSQL $major; the upstream changes are in"
  echo "    /usr/share/doc/$package/changelog.gz."
  echo
  echo " -- pg_snowflake authors <pg-snowflake@users.noreply.github.com>  $date"
} | gzip -9n > "$doc/changelog.Debian.gz"
gzip -9nc "$src/CHANGELOG.md" > "$doc/changelog.gz"
chmod 644 "$doc"/*

# What the library links: libc and its dynamic loader (libc6, at the newest symbol version it
# uses) and libgcc_s (Rust's unwinding). The registry's worker loads libpq.so.5 when it starts
# (src/coordination/registry/libpq.rs): the server's own where it has one, else libpq5's.
glibc=$(objdump -T "$lib/pg_snowflake.so" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
needed=$(readelf -d "$lib/pg_snowflake.so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
depends="postgresql-$major, libc6 (>= $glibc)"
grep -qx 'libgcc_s.so.1' <<< "$needed" && depends+=", libgcc-s1"
depends+=", libpq5"
unexpected=$(grep -vxE 'libc\.so\.6|libm\.so\.6|ld-linux-x86-64\.so\.2|libgcc_s\.so\.1' <<< "$needed" || true)
[ -z "$unexpected" ] || { echo "$0: the library links $unexpected: list its package in Depends" >&2; exit 1; }

# A package built against a server with assertions (the tests' 17) must also load into one
# without: it may not call a function that PostgreSQL declares only under USE_ASSERT_CHECKING
# (7 in 17: AssertCouldGetRelation, pgstat_assert_is_up, ...), which such a server lacks.
includes=$("$PG_CONFIG" --includedir-server)
assert_only=$(grep -rl USE_ASSERT_CHECKING "$includes" | xargs awk '
  FNR == 1 { d = 0 }
  /^#[ \t]*if/ { if (d > 0) d++; else if ($0 ~ /USE_ASSERT_CHECKING/ && $0 !~ /!/) d = 1; next }
  /^#[ \t]*else/ { if (d == 1) d = -1; next }
  /^#[ \t]*endif/ { if (d > 0) d--; else if (d == -1) d = 0; next }
  d > 0 && /extern/ { if (match($0, /[A-Za-z_0-9]+\(/)) print substr($0, RSTART, RLENGTH - 1) }' | sort -u)
calls=$(nm -D --undefined-only "$lib/pg_snowflake.so" | awk '{ print $NF }' | sed 's/@.*//' | sort -u)
assert_calls=$(comm -12 <(echo "$assert_only") <(echo "$calls"))
[ -z "$assert_calls" ] || { echo "$0: the library calls functions only servers with assertions have: $assert_calls" >&2; exit 1; }

installed_size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<EOF
Package: $package
Source: pg-snowflake
Version: $deb_version
Architecture: amd64
Maintainer: pg_snowflake authors <pg-snowflake@users.noreply.github.com>
Installed-Size: $installed_size
Depends: $depends
Section: database
Priority: optional
Description: Twitter-snowflake 64-bit ids generated inside PostgreSQL $major
 pg_snowflake hands out bigint ids that are unique across servers (a worker
 id per server), sort by creation time and cost less than nextval(): use
 DEFAULT snowflake_next() on a primary key. One generator lives in shared
 memory per cluster; a durable lease in WAL and in the data directory keeps
 ids above every earlier one across crashes, restarts and failovers.
 .
 The library must be in shared_preload_libraries, and every server needs its
 own snowflake.worker_id.
EOF
(cd "$stage" && find usr -type f | sort | xargs md5sum) > "$stage/DEBIAN/md5sums"
chmod 644 "$stage/DEBIAN/control" "$stage/DEBIAN/md5sums"

dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
say "$deb ($(du -k "$deb" | cut -f1) kB)"
