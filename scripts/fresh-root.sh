#!/usr/bin/env bash
# How long `make test` takes on a fresh machine, measured on this one: a Debian 12 root made by
# debootstrap with what a new machine of this project's kind has (the env notes of the
# workplace: gcc, make, git, perl, valgrind, gdb, PostgreSQL 15's client, Java 17, Node.js 20
# with npm, CPython 3.11 with pip, the Rust toolchains; no PostgreSQL server, no cargo-pgrx, an
# empty cargo registry), a fresh clone of HEAD in it, and `.ci/run` there, as CI runs it.
#
#   scripts/fresh-root.sh make     # the root, in /srv/fresh (about 2 minutes; FRESH_ROOT=DIR)
#   scripts/fresh-root.sh test     # a clone of HEAD into it, then .ci/run; prints the time
#   scripts/fresh-root.sh run CMD  # CMD inside it
#
# The root is fresh only once: `make test` installs into it. Remove it (`rm -rf /srv/fresh`,
# after `umount` of nothing: every mount lives in the namespace of one run) to measure again.
# Measured 2026-12-06 on 2 cores: see docs/developing.md.
#
# Node.js, CPython and rustup's toolchains are the host's, copied or bound in: a new machine has
# them installed outside Debian (nodesource's package, pyenv, rustup), and rustup here can
# fetch nothing. The host's CA bundle and its pip and npm settings go in too: the package
# registries are reached through this workplace's proxy, whose certificate only that bundle has.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${FRESH_ROOT:-/srv/fresh}
say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf '%s: %s\n' "$0" "$*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot and mounts)"

# CMD in the root, in a mount namespace of its own. The root is bound onto itself first, so
# that its / is a mount point: the nested `unshare --propagation private` of
# scripts/debian-root.sh refuses a / that is not one.
in_root() {
  unshare --mount --propagation private -- /bin/sh -euc '
    dir=$1; shift
    mount --bind "$dir" "$dir"
    mount -t proc proc "$dir/proc"
    mount -t sysfs sys "$dir/sys"
    mount --rbind /dev "$dir/dev"
    mount -t tmpfs -o mode=1777 shm "$dir/dev/shm"
    mkdir -p "$dir/root/.rustup"
    mount --bind /root/.rustup "$dir/root/.rustup"
    ca=/etc/ssl/certs/ca-certificates.crt
    exec chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
      PATH=/root/.cargo/bin:/root/.pyenv/shims:/root/.pyenv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      DEBIAN_FRONTEND=noninteractive SSL_CERT_FILE=$ca SSL_CERT_DIR=/etc/ssl/certs \
      CURL_CA_BUNDLE=$ca NODE_EXTRA_CA_CERTS=$ca GIT_SSL_CAINFO=$ca PIP_CERT=$ca \
      REQUESTS_CA_BUNDLE=$ca PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=180 "$@"' \
    sh "$ROOT" "$@"
}

make_root() {
  [ ! -e "$ROOT" ] || die "$ROOT exists: remove it to make a fresh one"
  command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"
  say "making a Debian 12 root in $ROOT"
  debootstrap --variant=minbase --include=ca-certificates bookworm "$ROOT" \
    http://deb.debian.org/debian >"$ROOT.debootstrap.log" 2>&1 ||
    die "debootstrap failed; see $ROOT.debootstrap.log"
  cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
  cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
  [ ! -f /etc/pip.conf ] || cp /etc/pip.conf "$ROOT/etc/pip.conf"
  [ ! -f /root/.npmrc ] || cp /root/.npmrc "$ROOT/root/.npmrc"
  say "installing what a new machine has from Debian"
  in_root sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends \
    build-essential git perl valgrind gdb postgresql-client-15 make openjdk-17-jdk-headless \
    procps iproute2 >/dev/null'
  say "copying in Node.js, CPython and the Rust toolchains' proxies (not cargo-pgrx)"
  mkdir -p "$ROOT/root/.cargo/bin"
  for f in /root/.cargo/bin/*; do
    [ "$(basename "$f")" = cargo-pgrx ] || cp -a "$f" "$ROOT/root/.cargo/bin/"
  done
  [ ! -f /root/.cargo/env ] || cp -a /root/.cargo/env "$ROOT/root/.cargo/"
  cp -a "$(readlink -f "$(command -v node)")" "$ROOT/usr/bin/node"
  cp -a /usr/lib/node_modules "$ROOT/usr/lib/"
  cp -a /usr/bin/npm /usr/bin/npx "$ROOT/usr/bin/"
  [ ! -d /root/.pyenv ] || cp -a /root/.pyenv "$ROOT/root/"
  echo "$ROOT"
}

test_root() {
  [ -x "$ROOT/bin/sh" ] || die "no root in $ROOT: scripts/fresh-root.sh make"
  [ ! -e "$ROOT/work/main" ] || die "$ROOT/work/main exists: the root is no longer fresh"
  mkdir -p "$ROOT/work/shared"
  # Citus's archives, where scripts/build-citus.sh looks for them (../shared/vendor).
  [ ! -d ../shared/vendor ] || cp -a ../shared/vendor "$ROOT/work/shared/"
  git clone -q . "$ROOT/work/main"
  say "make test in a fresh clone of $(git rev-parse --short HEAD), as .ci/run runs it"
  local start=$SECONDS rc=0
  in_root sh -c 'cd /work/main && CI=true bash .ci/run' || rc=$?
  local took=$((SECONDS - start))
  say "exit $rc after $((took / 60)) min $((took % 60)) s"
  return $rc
}

case "${1:-}" in
  make) make_root ;;
  test) test_root ;;
  run) shift; in_root "$@" ;;
  *) echo "usage: $0 make|test|run CMD..." >&2; exit 2 ;;
esac
