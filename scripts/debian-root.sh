#!/usr/bin/env bash
# A Debian root (a directory tree made by debootstrap) with Debian's own PostgreSQL in it, where
# the packages of pg_snowflake are installed by apt and tested against a server that a
# distribution built (tests/debian.rs) and where the apt repository of `make repo` is used as an
# apt source (tests/repo.rs). Nothing of it touches the host's PostgreSQL or its dpkg database.
#
#   scripts/debian-root.sh make trixie      # made once per machine and kept: prints its path
#   scripts/debian-root.sh make sid
#   scripts/debian-root.sh major trixie     # the PostgreSQL major Debian packages there: 17
#   scripts/debian-root.sh run DIR CMD...   # CMD inside it, as root
#
# The majors Debian builds as binary packages (checked 2026-11-25): trixie (Debian 13, the
# stable release) has only postgresql-17, 17.12-0+deb13u1, the release with this year's security
# fixes; sid has only postgresql-18, 18.6-3; neither has 15 or 16. `make` debootstraps the
# suite (trixie with its security and point-release updates), and installs its postgresql-N,
# libfaketime and PostgreSQL's client, without starting or making a cluster: the first time,
# 31 s and 574 MB for trixie, 58 s and 428 MB for sid, here. A made root is reused as it is (its stamp names this
# recipe's version), so a second `make test` spends nothing here. Remove the directory to make
# it anew.
#
# `run` gives CMD a mount namespace of its own (unshare), with /proc, /dev and /dev/shm
# mounted in the root: the mounts go away with the last process in it, a server included, and
# nothing is left mounted on the host. The network is the host's: a server in the root listens
# on the host's 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

# Bump when the recipe below changes: a root with another stamp is made anew.
RECIPE=1
BASE=${PG_SNOWFLAKE_ROOTS:-/var/cache/pg_snowflake}
MIRROR=${PG_SNOWFLAKE_DEBIAN_ROOT_MIRROR:-http://deb.debian.org/debian}
SECURITY=${PG_SNOWFLAKE_DEBIAN_ROOT_SECURITY:-http://deb.debian.org/debian-security}

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf '%s: %s\n' "$0" "$*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot and mounts)"

# run DIR CMD...: CMD in DIR, in a mount namespace of its own.
in_root() {
  local dir=$1; shift
  [ -x "$dir/bin/sh" ] || die "$dir is not a Debian root (no bin/sh)"
  # --propagation private: nothing mounted here is seen by the host, and the mounts end with
  # the namespace's last process.
  unshare --mount --propagation private -- /bin/sh -euc '
    dir=$1; shift
    mount -t proc proc "$dir/proc"
    mount --rbind /dev "$dir/dev"
    mount -t tmpfs -o mode=1777 shm "$dir/dev/shm"
    exec chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
      DEBIAN_FRONTEND=noninteractive "$@"' sh "$dir" "$@"
}

# The one PostgreSQL major that SUITE packages.
major_of() {
  case "$1" in
    trixie) echo 17 ;;
    sid) echo 18 ;;
    *) die "no Debian root for $1 (trixie and sid are the suites with a supported major)" ;;
  esac
}

make_root() {
  local suite=$1 dir=$BASE/debian-$1
  if [ "$(cat "$dir/.pg_snowflake-root" 2>/dev/null)" = "$suite $RECIPE" ]; then
    echo "$dir"; return 0
  fi
  local major; major=$(major_of "$suite")
  command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap; scripts/setup.sh installs it)"
  local tmp=$dir.partial
  rm -rf "$tmp"
  mkdir -p -m 0755 "$BASE"
  say "making a Debian $suite root in $dir with debootstrap (3 to 4 minutes, once per machine)"
  debootstrap --variant=minbase --include=ca-certificates "$suite" "$tmp" "$MIRROR" \
    >"$BASE/debootstrap-$suite.log" 2>&1 ||
    die "debootstrap failed; see $BASE/debootstrap-$suite.log"
  if [ "$suite" = sid ]; then
    # sid has no updates or security suites. Its Release file is renewed daily, and an archive
    # served from a snapshot (as here) keeps an expired one: its signature is still checked.
    echo "deb [check-valid-until=no] $MIRROR sid main" > "$tmp/etc/apt/sources.list"
  else
    printf 'deb %s %s main\n' "$MIRROR" "$suite" "$MIRROR" "$suite-updates" \
      "$SECURITY" "$suite-security" > "$tmp/etc/apt/sources.list"
  fi
  cp /etc/resolv.conf "$tmp/etc/resolv.conf"
  # No service starts inside the root: the tests start their own servers.
  printf '#!/bin/sh\nexit 101\n' > "$tmp/usr/sbin/policy-rc.d"
  chmod 755 "$tmp/usr/sbin/policy-rc.d"
  in_root "$tmp" apt-get update -qq >/dev/null
  # postgresql-common first, told not to make a cluster: the tests make their own.
  in_root "$tmp" apt-get install -y -qq --no-install-recommends postgresql-common >/dev/null
  sed -i 's/^#\?\s*create_main_cluster.*/create_main_cluster = false/' \
    "$tmp/etc/postgresql-common/createcluster.conf"
  grep -qx 'create_main_cluster = false' "$tmp/etc/postgresql-common/createcluster.conf" ||
    die "could not turn off postgresql-common's main cluster"
  in_root "$tmp" apt-get install -y -qq --no-install-recommends \
    "postgresql-$major" "postgresql-client-$major" libfaketime >/dev/null
  in_root "$tmp" apt-get clean
  echo "$suite $RECIPE" > "$tmp/.pg_snowflake-root"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  say "Debian $suite root ready: $(in_root "$dir" dpkg-query -W -f='${Package} ${Version}' "postgresql-$major")"
  echo "$dir"
}

case "${1:-}" in
  make) make_root "${2:?usage: $0 make SUITE}" ;;
  major) major_of "${2:?usage: $0 major SUITE}" ;;
  run) shift; in_root "${1:?usage: $0 run DIR CMD...}" "${@:2}" ;;
  *) echo "usage: $0 make SUITE | major SUITE | run DIR CMD..." >&2; exit 2 ;;
esac
