#!/usr/bin/env bash
# The extension image of one PostgreSQL major, as CloudNativePG mounts extensions (image
# volumes, PostgreSQL 18's extension_control_path): an OCI image whose only files are the
# extension's, the ones its Debian package installs, at the places CloudNativePG's own extension
# images use,
#   /lib/pg_snowflake.so
#   /share/extension/pg_snowflake.control and pg_snowflake--*.sql
# made from that package (make package) by umoci, with no container daemon, into an OCI image
# layout directory, tagged <version>-<major>-<distro> as CloudNativePG tags its own
# (postgis-extension:3.6.2-18-trixie); distro is where the library was built, the oldest
# distribution whose C library can load it.
#
#   scripts/image.sh DEB [LAYOUT_DIR]
#
# LAYOUT_DIR defaults to target/image/pg_snowflake-<tag>; it is made anew. Prints
# oci:<dir>:<tag>, what skopeo copy takes (see README, Installing).
set -euo pipefail
# The layer's modes are the files' own: not narrowed by a caller's umask (077 made its root 0700,
# which the server's user could not enter, and another digest).
umask 022

die() { printf '%s: %s\n' "$0" "$*" >&2; exit 1; }
# Both paths as the caller gave them, before the cd.
deb=$(realpath -e -- "${1:?usage: $0 DEB [LAYOUT_DIR]}")
layout=${2:+$(realpath -m -- "$2")}
cd "$(dirname "$0")/.."
command -v umoci >/dev/null || die "umoci is missing (make image installs it: scripts/setup.sh image)"

# Every check before anything is written or removed.
package=$(dpkg-deb -f "$deb" Package)
major=${package#postgresql-}; major=${major%-pg-snowflake}
case "$major" in [1-9][0-9]) ;; *) die "$deb is not a package of pg_snowflake (postgresql-N-pg-snowflake)" ;; esac
[ "$package" = "postgresql-$major-pg-snowflake" ] ||
  die "$deb is $package, not a package of pg_snowflake (postgresql-N-pg-snowflake)"
version=$(dpkg-deb -f "$deb" Version); version=${version%-*}
# An OCI tag is [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}: no epoch (1:) and no ~ in it.
case "$version" in ''|*[!0-9A-Za-z.+]*) die "version $version of $deb makes no image tag" ;; esac
version=${version//+/_}
# VERSION_CODENAME: bookworm here; sid's says the next release's name, so sid is named by ID.
. /etc/os-release
case "${PRETTY_NAME:-}" in */sid) distro=sid ;; *) distro=${VERSION_CODENAME:?/etc/os-release names no release} ;; esac
tag=$version-$major-$distro
[ ${#tag} -le 128 ] || die "the tag $tag is longer than the 128 characters of an OCI tag"
layout=${layout:-$PWD/target/image/pg_snowflake-$tag}
case "$layout" in *:*) die "$layout: a layout's path has no ':' (umoci and skopeo read it as the tag)" ;; esac
case "$deb" in "$layout"/*) die "$deb is inside $layout, which is made anew" ;; esac
# What is there already goes only if it is an OCI layout and nothing else (a directory holding a
# file `oci-layout` among others' files is not one), and only where no one but the caller and
# root could swap the name for another directory while this runs.
parent=$(dirname "$layout")
mkdir -p "$parent"
read -r owner mode < <(stat -c '%u %a' "$parent")
[ "$owner" = 0 ] || [ "$owner" = "$(id -u)" ] || die "$parent belongs to another user: name another directory"
[ $((8#$mode & 8#022)) -eq 0 ] || die "$parent may be written by others (mode $mode): name another directory"
if [ -e "$layout" ] || [ -L "$layout" ]; then
  [ -d "$layout" ] && [ ! -L "$layout" ] && [ -f "$layout/oci-layout" ] && [ ! -L "$layout/oci-layout" ] &&
    [ -z "$(find "$layout" -mindepth 1 -maxdepth 1 ! -name oci-layout ! -name index.json ! -name blobs)" ] &&
    [ -z "$(find "$layout/blobs" -mindepth 1 ! -path "$layout/blobs/sha256" \
              -regextype posix-extended ! -regex '.*/blobs/sha256/[0-9a-f]{64}')" ] ||
    die "$layout exists and is not an OCI image layout: not removed (name another directory)"
fi

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$deb" "$work/deb"
lib=$work/deb/usr/lib/postgresql/$major/lib
ext=$work/deb/usr/share/postgresql/$major/extension
# Only regular files and directories: a link (to /etc/shadow, or a directory linked to the
# host's own PostgreSQL), a device (this machine's disk) or a FIFO (a read that never ends) in a
# package would put the machine's files into the image, or hang.
# mutant: image_links
odd=$(find "$work/deb" ! -type f ! -type d -printf '%P\n')
[ -z "$odd" ] || die "$deb holds links, devices or FIFOs, which an extension image does not take: $odd"
[ -f "$lib/pg_snowflake.so" ] && [ -f "$ext/pg_snowflake.control" ] ||
  die "$deb holds no pg_snowflake.so or pg_snowflake.control for PostgreSQL $major"
# The extension's files are its control file and its scripts, no other name, and files.
other=$(find "$ext" -mindepth 1 -maxdepth 1 -name 'pg_snowflake*' ! -type f -printf '%P\n')
[ -z "$other" ] || die "$deb holds directories named as the extension's files: $other"
other=$(find "$ext" -mindepth 1 -maxdepth 1 -name 'pg_snowflake*' ! -name pg_snowflake.control \
          -regextype posix-extended ! -regex '.*/pg_snowflake--[0-9.]+(--[0-9.]+)?\.sql' -printf '%P\n')
[ -z "$other" ] || die "$deb holds files of another kind in the extension directory: $other"
[ "$(du -sm "$work/deb" | cut -f1)" -le 256 ] || die "$deb unpacks to more than 256 MB"

# Made in this run's own directory, moved into place when whole: a run that fails leaves what
# was there.
oci=$work/oci
umoci init --layout "$oci"
# An image with no layer and no base (FROM scratch), then one layer: the bundle's rootfs as
# unpacked from it, with the files added.
umoci new --image "$oci:$tag"
rootless=; [ "$(id -u)" -eq 0 ] || rootless=--rootless
umoci unpack $rootless --image "$oci:$tag" "$work/bundle" >/dev/null
root=$work/bundle/rootfs
# mutant: image_files
install -d -m 755 "$root/lib" "$root/share" "$root/share/extension"
install -p -m 644 "$lib/pg_snowflake.so" "$root/lib/"
find "$ext" -mindepth 1 -maxdepth 1 -name 'pg_snowflake*' -exec install -p -m 644 -t "$root/share/extension/" {} +
# The files' times are the package's (dpkg-deb -x and install -p keep them), the directories'
# too, and the image's times the control file's: one package makes one digest, whenever and
# wherever it is made.
touch -r "$ext/pg_snowflake.control" "$root" "$root/lib" "$root/share" "$root/share/extension"
created=$(date -u -d "@$(stat -c %Y "$ext/pg_snowflake.control")" +%Y-%m-%dT%H:%M:%SZ)
umoci repack --image "$oci:$tag" --history.created "$created" \
  --history.created_by "scripts/image.sh $(basename "$deb")" "$work/bundle"
umoci config --no-history --image "$oci:$tag" --created "$created" \
  --os linux --architecture "$(dpkg --print-architecture)" \
  --config.label "org.opencontainers.image.title=pg_snowflake" \
  --config.label "org.opencontainers.image.description=pg_snowflake $version for PostgreSQL $major ($distro), as an extension image: /lib and /share/extension" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.licenses=$(sed -n 's/^license = "\(.*\)"/\1/p' Cargo.toml | head -1)"
# What umoci new and config left behind: only the tagged image's blobs stay. Readable by all,
# as a registry's copy is (umoci writes 0600: another user's skopeo could not copy it).
umoci gc --layout "$oci"
chmod -R a+rX "$oci"
if [ -e "$layout" ]; then mv -T "$layout" "$work/old"; fi
mv -T "$oci" "$layout"
echo "oci:$layout:$tag"
