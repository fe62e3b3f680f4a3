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
package=$(dpkg-deb -f "$deb" Package)
major=${package#postgresql-}; major=${major%-pg-snowflake}
case "$major" in ''|*[!0-9]*) die "$deb is not a package of pg_snowflake (postgresql-N-pg-snowflake)" ;; esac
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
layout=${layout:-$PWD/target/image/pg_snowflake-$tag}
# Made anew: only an OCI layout, or nothing, is removed there.
[ ! -e "$layout" ] || [ -f "$layout/oci-layout" ] ||
  die "$layout exists and is not an OCI image layout: not removed (name another directory)"

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$deb" "$work/deb"
lib=$work/deb/usr/lib/postgresql/$major/lib
ext=$work/deb/usr/share/postgresql/$major/extension
[ -f "$lib/pg_snowflake.so" ] && [ -f "$ext/pg_snowflake.control" ] ||
  die "$deb holds no pg_snowflake.so or pg_snowflake.control for PostgreSQL $major"
# Only regular files go in: a link in a package (to /etc/shadow, or a directory linked to the
# host's own PostgreSQL) would put this machine's files into the image.
# mutant: image_links
links=$(find "$work/deb" -type l -printf '%P\n')
[ -z "$links" ] || die "$deb holds links, which an extension image does not take: $links"

rm -rf "$layout"
mkdir -p "$(dirname "$layout")"
umoci init --layout "$layout"
# An image with no layer and no base (FROM scratch), then one layer: the bundle's rootfs as
# unpacked from it, with the files added.
umoci new --image "$layout:$tag"
rootless=; [ "$(id -u)" -eq 0 ] || rootless=--rootless
umoci unpack $rootless --image "$layout:$tag" "$work/bundle" >/dev/null
root=$work/bundle/rootfs
# mutant: image_files
install -d -m 755 "$root/lib" "$root/share" "$root/share/extension"
install -p -m 644 "$lib/pg_snowflake.so" "$root/lib/"
install -p -m 644 "$ext"/pg_snowflake* "$root/share/extension/"
# The files' times are the package's (dpkg-deb -x and install -p keep them), the directories'
# too, and the image's times the control file's: one package makes one digest, whenever and
# wherever it is made.
touch -r "$ext/pg_snowflake.control" "$root" "$root/lib" "$root/share" "$root/share/extension"
created=$(date -u -d "@$(stat -c %Y "$ext/pg_snowflake.control")" +%Y-%m-%dT%H:%M:%SZ)
umoci repack --image "$layout:$tag" --history.created "$created" \
  --history.created_by "scripts/image.sh $(basename "$deb")" "$work/bundle"
umoci config --no-history --image "$layout:$tag" --created "$created" \
  --os linux --architecture "$(dpkg --print-architecture)" \
  --config.label "org.opencontainers.image.title=pg_snowflake" \
  --config.label "org.opencontainers.image.description=pg_snowflake $version for PostgreSQL $major ($distro), as an extension image: /lib and /share/extension" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.licenses=$(sed -n 's/^license = "\(.*\)"/\1/p' Cargo.toml | head -1)"
# What umoci new and config left behind: only the tagged image's blobs stay.
umoci gc --layout "$layout"
echo "oci:$layout:$tag"
