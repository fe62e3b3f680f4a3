#!/usr/bin/env bash
# A signed apt repository of pg_snowflake's packages, laid out as Debian's and PGDG's are, so
# that a server installs an extension by name (`apt-get install postgresql-17-pg-snowflake`) and
# upgrades it with `apt-get install --only-upgrade`, as with PGDG's `postgresql-17-pgvector`:
#
#   scripts/repo.sh OUT DEB...   # `make repo` gives it every major's package of this release
#
#   OUT/pool/main/p/pg-snowflake/postgresql-N-pg-snowflake_VERSION-1_amd64.deb
#   OUT/dists/pg-snowflake/main/binary-amd64/Packages, Packages.gz
#   OUT/dists/pg-snowflake/Release, InRelease (signed inline), Release.gpg (signed apart)
#   OUT/pg_snowflake.asc         # the public key, for signed-by
#
# Served over HTTP (any web server of OUT), it is used with
#
#   deb [signed-by=/etc/apt/keyrings/pg_snowflake.asc] http://HOST/ pg-snowflake main
#
# The key is the repository's own, made with gpg the first time into
# PG_SNOWFLAKE_REPO_GNUPGHOME (default target/repo-key; keep it, or every user must fetch a new
# key). A publisher sets that to the directory of the key it publishes with. Debs of several
# versions may go in together: apt installs the newest and upgrades to it (tests/packaging/repo.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: $0 OUT DEB..." >&2; exit 2; }
[ $# -ge 2 ] || usage
out=$1; shift
SUITE=pg-snowflake
KEY_HOME=${PG_SNOWFLAKE_REPO_GNUPGHOME:-target/repo-key}
KEY_NAME="pg_snowflake apt repository <pg-snowflake@users.noreply.github.com>"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf '%s: %s\n' "$0" "$*" >&2; exit 1; }
command -v dpkg-scanpackages >/dev/null || die "dpkg-scanpackages is missing (apt-get install dpkg-dev)"
command -v gpg >/dev/null || die "gpg is missing (apt-get install gnupg)"
for deb in "$@"; do [ -f "$deb" ] || die "$deb is missing (make package PG=N builds it)"; done

# gpg starts an agent for the key's directory: end it when done, whatever happens.
# shellcheck disable=SC2174 # the key's directory is 0700; its parent is the build's
mkdir -p -m 0700 "$KEY_HOME"
trap 'gpgconf --homedir "$KEY_HOME" --kill gpg-agent 2>/dev/null || true' EXIT
gpg_() { gpg --batch --quiet --homedir "$KEY_HOME" "$@"; }
if ! gpg_ --list-secret-keys "$KEY_NAME" >/dev/null 2>&1; then
  say "making the repository's signing key in $KEY_HOME"
  gpg_ --passphrase '' --quick-gen-key "$KEY_NAME" rsa3072 sign never
fi
fingerprint=$(gpg_ --with-colons --list-secret-keys "$KEY_NAME" | awk -F: '$1 == "fpr" { print $10; exit }')

rm -rf "$out"
pool=$out/pool/main/p/pg-snowflake
dist=$out/dists/$SUITE
mkdir -p "$pool" "$dist/main/binary-amd64"
cp "$@" "$pool/"
# Every version of every package in the pool is listed (-m): apt chooses the newest.
(cd "$out" && dpkg-scanpackages -m pool /dev/null 2>/dev/null) > "$dist/main/binary-amd64/Packages"
gzip -9nk "$dist/main/binary-amd64/Packages"
[ -s "$dist/main/binary-amd64/Packages" ] || die "no package was listed"

# Release: what apt checks every index against; InRelease and Release.gpg sign it.
{
  echo "Origin: pg_snowflake"
  echo "Label: pg_snowflake"
  echo "Suite: $SUITE"
  echo "Codename: $SUITE"
  echo "Date: $(date -Ru)"
  echo "Architectures: amd64"
  echo "Components: main"
  echo "Description: pg_snowflake, Twitter-snowflake ids inside PostgreSQL: one package per major"
  echo "SHA256:"
  for f in main/binary-amd64/Packages main/binary-amd64/Packages.gz; do
    printf ' %s %s %s\n' "$(sha256sum "$dist/$f" | cut -d' ' -f1)" "$(stat -c %s "$dist/$f")" "$f"
  done
} > "$dist/Release"
# mutant: repo_signature
gpg_ --local-user "$fingerprint" --clearsign -o "$dist/InRelease" "$dist/Release"
gpg_ --local-user "$fingerprint" --armor --detach-sign -o "$dist/Release.gpg" "$dist/Release"
gpg_ --armor --export "$fingerprint" > "$out/pg_snowflake.asc"
say "$out: $(grep -c '^Package:' "$dist/main/binary-amd64/Packages") packages, signed by $fingerprint"
