#!/usr/bin/env bash
# Builds Citus from a vendored source archive and installs it into one PostgreSQL major of this
# project (scripts/pg-config.sh), for tests/replication/citus.rs and `make bench`'s Citus run. No package of
# Citus exists for Debian 12 (nor on PyPI), and the machines that run `make test` reach no
# source host outside the package registries: the archives come from a directory kept beside
# the checkout (see `how_to_get` below), each checked by its sha256 before anything is unpacked.
#
#   scripts/build-citus.sh 18                # build and install (about a minute on 2 cores)
#   scripts/build-citus.sh --missing-ok 18   # the same, but only say so when no archive is found
#                                            #   (scripts/setup.sh test: the Citus suites then fail,
#                                            #   saying how to get Citus; nothing else does)
#   scripts/build-citus.sh --how 18          # print how to get the archive, and nothing else
#   scripts/build-citus.sh --version 18      # print the Citus release of that major
#
# Which release: 13.2.2 on 15 (Citus 14 dropped 15), 14.0.1 on 16, 17 (assert-enabled: Citus is
# built with the server's CFLAGS, so with its assertions) and 18. A stamp in the server's
# extension directory records the release and the archive's sha256: with it and citus.so in
# place, the script exits at once (milliseconds), so setup runs it every time.
set -euo pipefail
cd "$(dirname "$0")/.."
unset MAKELEVEL MAKEFLAGS MFLAGS # Citus's makefiles are not part of our make (see build-postgres.sh)

MODE=build
case "${1:-}" in --missing-ok|--how|--version) MODE=${1#--}; shift ;; esac
MAJOR=${1:?usage: $0 [--missing-ok|--how|--version] MAJOR}

# The release of each major, its archive and the archive's sha256 (as /work/shared/vendor's
# README lists them: `git archive --format=tar --prefix=citus-V/ vV | gzip -n -9` of the tag).
case "$MAJOR" in
  15) VERSION=13.2.2; SHA256=c8fc76dc8294636a52b1a0dd75a20d8b4a36937df6443e30ca84d8d0464a6bb9
      COMMIT=cc91f4c29cc358f66e70eb1ef204a45999933926 ;;
  16|17|18) VERSION=14.0.1; SHA256=26ddb8ec9de07c5fa8426e435d10936e5cd6bed01a5ad94aab92e818081e5ec9
      COMMIT=d5731d775cde45b61e541a393889a64bf4772d14 ;;
  *) echo "$0: no Citus release for PostgreSQL $MAJOR (15 to 18 have one)" >&2; exit 2 ;;
esac
ARCHIVE=citus-$VERSION.tar.gz
[ "$MODE" != version ] || { echo "$VERSION"; exit 0; }

# Where the archive may be, in this order.
CANDIDATES=()
[ -z "${PG_SNOWFLAKE_VENDOR:-}" ] || CANDIDATES+=("$PG_SNOWFLAKE_VENDOR")
for dir in "$(cd .. && pwd)/shared/vendor" /work/shared/vendor; do
  [[ " ${CANDIDATES[*]} " == *" $dir "* ]] || CANDIDATES+=("$dir")
done

recipe() {
  cat <<EOF
Make it on a machine that reaches GitHub, and put it in one of those directories (or name its
directory in PG_SNOWFLAKE_VENDOR):
  git clone https://github.com/citusdata/citus && cd citus
  git archive --format=tar --prefix=citus-$VERSION/ v$VERSION | gzip -n -9 > $ARCHIVE
  sha256sum $ARCHIVE   # must be $SHA256 (tag v$VERSION, commit $COMMIT)
then run: scripts/build-citus.sh $MAJOR
EOF
}
how_to_get() {
  echo "Citus $VERSION (for PostgreSQL $MAJOR) is built from $ARCHIVE, which was not found in:"
  printf '  %s\n' "${CANDIDATES[@]}"
  recipe
}
[ "$MODE" != how ] || { how_to_get; exit 0; }

# CITUS_PG_CONFIG: another pg_config of that major (tests/packaging/setup_scripts.rs names a stand-in whose
# directories are empty, to see that a wrong archive installs nothing).
PG_CONFIG=${CITUS_PG_CONFIG:-$(scripts/pg-config.sh "$MAJOR")}
[ -x "$PG_CONFIG" ] || { echo "$0: PostgreSQL $MAJOR is not installed ($PG_CONFIG): scripts/setup.sh run $MAJOR" >&2; exit 1; }
LIBDIR=$("$PG_CONFIG" --pkglibdir)
STAMP=$("$PG_CONFIG" --sharedir)/extension/citus.pg_snowflake-build
WANT="$VERSION $SHA256 $("$PG_CONFIG" --version)"
if [ -f "$LIBDIR/citus.so" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ]; then
  exit 0
fi

archive=
for dir in "${CANDIDATES[@]}"; do
  [ -f "$dir/$ARCHIVE" ] && { archive=$dir/$ARCHIVE; break; }
done
if [ -z "$archive" ]; then
  if [ "$MODE" = missing-ok ]; then
    printf '\033[1m==> Citus not built for PostgreSQL %s: the Citus suites will fail\033[0m\n' "$MAJOR" >&2
    how_to_get >&2
    exit 0
  fi
  how_to_get >&2
  exit 1
fi
# The sha256 is checked on a private copy, and the copy is unpacked: checking the archive in
# place and opening it again to unpack would let whoever can write its directory swap another
# in between (and its Makefile may run under sudo below).
work=$(mktemp -d "/tmp/pg_snowflake-build-citus$MAJOR.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$archive" "$work/citus.tar.gz"
# mutant: citus_sha256
got=$(sha256sum "$work/citus.tar.gz" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
  {
    echo "$0: $archive has the wrong sha256; nothing was built."
    echo "  sha256:   $got"
    echo "  expected: $SHA256 (Citus $VERSION, tag commit $COMMIT)"
    echo "It is corrupt or another release. Looked in, in this order:"
    printf '  %s\n' "${CANDIDATES[@]}"
    recipe
  } >&2
  exit 1
fi

printf '\033[1m==> building Citus %s for PostgreSQL %s, about a minute\033[0m\n' "$VERSION" "$MAJOR"
for header in lz4.h zstd.h; do
  [ -f "/usr/include/$header" ] ||
    { echo "$0: /usr/include/$header is missing (Debian: apt-get install liblz4-dev libzstd-dev; scripts/setup.sh test installs them)" >&2; exit 1; }
done
tar -xzf "$work/citus.tar.gz" -C "$work"
# Debian's 15.20 declares have_createdb_privilege() in its server headers (PostgreSQL 16 made it
# extern, and a 15 minor release followed), and Citus 13.2.2 defines a static one of its own for
# servers before 16: "static declaration of 'have_createdb_privilege' follows non-static
# declaration". Where the server declares it, Citus's copy (the same check of rolcreatedb) goes.
compat=$work/citus-$VERSION/src/include/pg_version_compat.h
if grep -q 'extern bool have_createdb_privilege(void)' \
     "$("$PG_CONFIG" --includedir-server)/commands/dbcommands.h" 2>/dev/null &&
   grep -q '^have_createdb_privilege(void)' "$compat"; then
  perl -0777 -pi -e 's/static inline bool\nhave_createdb_privilege\(void\)\n\{.*?\n\}\n//s' "$compat"
  ! grep -q '^have_createdb_privilege(void)' "$compat" ||
    { echo "$0: could not take Citus's own have_createdb_privilege() out of $compat" >&2; exit 1; }
fi
SUDO=; [ -w "$LIBDIR" ] || SUDO=sudo
started=$SECONDS
# Its output goes to a log, shown when the build fails (PGXS warns of every overridden recipe).
if ! (
  cd "$work/citus-$VERSION"
  # libcurl only sends anonymous usage statistics.
  ./configure PG_CONFIG="$PG_CONFIG" --without-libcurl &&
    make -j"$(nproc)" &&
    $SUDO make install
) >"$work/build.log" 2>&1; then
  {
    echo "$0: building Citus $VERSION for PostgreSQL $MAJOR failed. Its errors:"
    grep -E 'error:|Error [0-9]' "$work/build.log" | head -20
    echo "(scripts/setup.sh test installs the headers Citus needs: liblz4-dev, libzstd-dev, and for 15 libkrb5-dev)"
  } >&2
  exit 1
fi
echo "$WANT" | $SUDO tee "$STAMP" >/dev/null
printf '\033[1m==> Citus %s is in %s (%d s)\033[0m\n' "$VERSION" "$LIBDIR" $((SECONDS - started))
