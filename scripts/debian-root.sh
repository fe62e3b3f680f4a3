#!/usr/bin/env bash
# A Debian root (a directory tree made by debootstrap) with Debian's own PostgreSQL in it, where
# the packages of pg_snowflake are installed by apt and tested against a server that a
# distribution built (tests/packaging/debian.rs) and where the apt repository of `make repo` is used as an
# apt source (tests/packaging/repo.rs). Nothing of it touches the host's PostgreSQL or its dpkg database.
#
#   scripts/debian-root.sh make trixie      # made once per machine and kept: prints its path
#   scripts/debian-root.sh make sid
#   scripts/debian-root.sh major trixie     # the PostgreSQL major Debian packages there: 17
#   scripts/debian-root.sh run DIR CMD...   # CMD inside it, as root
#   scripts/debian-root.sh make sid-19      # sid with Debian experimental's PostgreSQL 19
#   scripts/debian-root.sh build sid-19 CMD...  # CMD in the build root of 19, in this checkout
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
    sid-19) echo 19 ;;
    *) die "no Debian root for $1 (trixie, sid and sid-19 are the roots with a supported major)" ;;
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
  # shellcheck disable=SC2174 # the mode is the cache directory's; /var/cache exists
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

# PostgreSQL 19 (see scripts/postgres-versions): Debian serves no source of it, only experimental's
# binary packages, built against sid's libc6 2.43 (this host's is 2.36: nothing built there runs
# here, nor the other way round). The root of 19 is a copy of the sid root above (with its
# Debian 18, the old side of pg_upgrade to 19) with the listed release's postgresql-19,
# postgresql-client-19 and libpq5 installed by apt from their checked .debs; like the others, a
# made one is kept and reused. Its release is the first listed one whose every package
# downloads with its sha256 (the pool drops files its index still lists); a root already made
# from a listed release is kept when a newer one is listed: remove it to move to that one.
#
# `build sid-19 CMD...` runs CMD in the build root of 19: the root of 19 (never changed, so that
# the copies tests/packaging/debian.rs and tests/packaging/repo.rs install into are Debian's as shipped) under an
# overlay whose upper layer (debian-sid-19.build) holds what building and testing add: 19's
# server headers (the listed release's postgresql-server-dev-19 and libpq-dev), sid's
# postgresql-server-dev-18 with libicu-dev (Debian's 18 is built with ICU, and its pg_locale.h
# includes ICU's headers, which bindgen reads), build-essential, libclang-dev and what scripts/setup.sh installs
# there. The checkout is mounted at its own path, with target/sid-19 as its target/ (builds,
# virtual environments and logs of another libc), /root/.rustup and /root/.cargo are the host's
# (the toolchain and cargo-pgrx), the host's CA bundle is the root's, and the other roots are
# mounted read-only for the tests that copy them. One session at a time: an overlay's upper
# layer takes one mount.
RECIPE_19=1
RECIPE_BUILD=2
VERSIONS=${PG_SNOWFLAKE_VERSIONS:-scripts/postgres-versions}
DEBS=$BASE/debs-19
BUILD=$BASE/debian-sid-19.build

# The .debs of the first listed release of 19 that can be had, checked, into $DEBS/VERSION;
# prints VERSION. A download with another sha256 stops everything (as scripts/build-postgres.sh).
fetch_19() {
  local versions v pkg sha file url got tried=() ok
  mapfile -t versions < <(awk '$1 == "19" && !seen[$2]++ { print $2 }' "$VERSIONS")
  [ ${#versions[@]} -gt 0 ] || die "$VERSIONS lists no release of PostgreSQL 19"
  for v in "${versions[@]}"; do
    mkdir -p "$DEBS/$v"
    ok=1
    while read -r sha pkg; do
      file=$DEBS/$v/${pkg}_${v}_amd64.deb
      [ "$(sha256sum "$file" 2>/dev/null | cut -d' ' -f1)" != "$sha" ] || continue
      url=$MIRROR/pool/main/p/postgresql-19/${pkg}_${v}_amd64.deb
      say "downloading $url"
      if ! got=$(curl -sS -L --connect-timeout 20 --max-time 600 --retry 3 --retry-max-time 300 \
                   -o "$file.part" -w '%{http_code}' "$url" 2>&1) || [ "$got" != 200 ]; then
        tried+=("$url: ${got:-no answer}"); ok=0; rm -f "$file.part"; break
      fi
      got=$(sha256sum "$file.part" | cut -d' ' -f1)
      [ "$got" = "$sha" ] || die "$url has sha256 $got, not $sha ($VERSIONS): corrupt, or not the package listed; nothing was installed"
      mv "$file.part" "$file"
    done < <(awk -v v="$v" '$1 == "19" && $2 == v && $4 ~ /^deb:/ { print $3, substr($4, 5) }' "$VERSIONS")
    if [ $ok = 1 ]; then echo "$v"; return 0; fi
    say "PostgreSQL 19 $v cannot be had (${tried[-1]}); trying the next listed release"
  done
  die "none of the listed PostgreSQL 19 releases could be had: ${tried[*]}"
}

make_root_19() {
  local dir=$BASE/debian-sid-19
  local stamp; stamp=$(cat "$dir/.pg_snowflake-root" 2>/dev/null || true)
  local made=${stamp#"sid-19 $RECIPE_19.$RECIPE "}
  if [ "$made" != "$stamp" ] && awk -v v="$made" '$1 == "19" && $2 == v { f = 1 } END { exit !f }' "$VERSIONS"; then
    echo "$dir"; return 0
  fi
  make_root sid >/dev/null
  local started=$SECONDS version; version=$(fetch_19)
  local tmp=$dir.partial
  rm -rf "$tmp"
  say "making the Debian sid root of PostgreSQL 19 ($version) in $dir, from the sid root"
  cp -a --reflink=auto "$BASE/debian-sid" "$tmp"
  rm "$tmp/.pg_snowflake-root"
  mkdir -p "$tmp/tmp/debs-19"
  local p debs=()
  for p in postgresql-19 postgresql-client-19 libpq5; do
    cp "$DEBS/$version/${p}_${version}_amd64.deb" "$tmp/tmp/debs-19/"
    debs+=("/tmp/debs-19/${p}_${version}_amd64.deb")
  done
  in_root "$tmp" apt-get update -qq >/dev/null
  in_root "$tmp" apt-get install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
  rm -rf "$tmp/tmp/debs-19"
  in_root "$tmp" apt-get clean
  local says; says=$(in_root "$tmp" /usr/lib/postgresql/19/bin/pg_config --version)
  case "$says" in "PostgreSQL 19"*) ;; *) die "the root's pg_config of 19 says: $says" ;; esac
  echo "sid-19 $RECIPE_19.$RECIPE $version" > "$tmp/.pg_snowflake-root"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  say "Debian sid root of 19 ready: $says, $(du -sm "$dir" | cut -f1) MB, in $((SECONDS - started)) s"
  echo "$dir"
}

# session LOWER CHECKOUT CMD...: CMD in the overlay of $BUILD over LOWER, in a mount namespace of
# its own (as in_root), with the checkout (if any) mounted as described above.
session() {
  # The environment passed on is one word per VAR=value, whose values have no spaces (the grep).
  # shellcheck disable=SC2046
  unshare --mount --propagation private -- /bin/sh -euc '
    lower=$1 layer=$2 checkout=$3 base=$4; shift 4
    m=$layer/merged
    mount -t overlay overlay -o "lowerdir=$lower,upperdir=$layer/upper,workdir=$layer/work" "$m"
    mount -t proc proc "$m/proc"
    mount -t sysfs sysfs "$m/sys"
    mount --rbind /dev "$m/dev"
    mount -t tmpfs -o mode=1777 shm "$m/dev/shm"
    mount --bind -o ro /etc/ssl/certs/ca-certificates.crt "$m/etc/ssl/certs/ca-certificates.crt"
    for d in /root/.rustup /root/.cargo; do mkdir -p "$m$d"; mount --bind "$d" "$m$d"; done
    if [ -n "$checkout" ]; then
      mkdir -p "$m$checkout"
      mount --bind "$checkout" "$m$checkout"
      mount --bind "$checkout/target/sid-19" "$m$checkout/target"
      for r in debian-trixie debian-sid debian-sid-19; do
        [ -d "$base/$r" ] || continue
        mkdir -p "$m$base/$r"
        mount --bind -o ro "$base/$r" "$m$base/$r"
      done
    fi
    exec chroot "$m" /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "${checkout:-/}" "$@"' \
    sh "$1" "$BUILD" "$2" "$BASE" /usr/bin/env -i HOME=/root USER=root LOGNAME=root \
      PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
      SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
      REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt CURL_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
      NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt GIT_SSL_CAINFO=/etc/ssl/certs/ca-certificates.crt \
      CARGO_HTTP_CAINFO=/etc/ssl/certs/ca-certificates.crt \
      $(env | grep -E '^(PG_SNOWFLAKE_[A-Z_]*|SNOWFLAKE_[A-Z_]*|RUST_BACKTRACE|TERM)=[^ ]*$' || true) \
      "${@:3}"
}

in_build_root() {
  local lower; lower=$(make_root_19)
  [ "$(id -u)" -eq 0 ] && [ -d /root/.rustup ] && [ -d /root/.cargo ] ||
    die "the build root uses root's Rust toolchain (/root/.rustup, /root/.cargo): run as root with Rust installed by rustup"
  mkdir -p "$BASE"
  exec 9>"$BUILD.lock"
  flock -n 9 || die "another session of the build root of 19 is running (its overlay layer takes one mount at a time)"
  local want; want="$(cat "$lower/.pg_snowflake-root") build $RECIPE_BUILD"
  if [ "$(cat "$BUILD/stamp" 2>/dev/null)" != "$want" ]; then
    local started=$SECONDS version=${want#* * }; version=${version%% *}
    say "making the build layer of the root of 19 in $BUILD (19's headers, build tools; once per machine)"
    rm -rf "$BUILD"
    mkdir -p "$BUILD/upper/tmp/debs-19" "$BUILD/work" "$BUILD/merged"
    chmod 1777 "$BUILD/upper/tmp"
    fetch_19 >/dev/null
    cp "$DEBS/$version/postgresql-server-dev-19_${version}_amd64.deb" \
       "$DEBS/$version/libpq-dev_${version}_amd64.deb" "$BUILD/upper/tmp/debs-19/"
    session "$lower" "" apt-get update -qq >/dev/null
    session "$lower" "" apt-get install -y -qq --no-install-recommends /tmp/debs-19/postgresql-server-dev-19_${version}_amd64.deb \
      /tmp/debs-19/libpq-dev_${version}_amd64.deb postgresql-server-dev-18 libicu-dev \
      build-essential libclang-dev pkg-config make git curl ca-certificates sudo python3 python3-venv >/dev/null
    session "$lower" "" apt-get clean
    rm -rf "$BUILD/upper/tmp/debs-19"
    echo "$want" > "$BUILD/stamp"
    say "build layer ready: $(du -sm "$BUILD/upper" | cut -f1) MB, in $((SECONDS - started)) s"
  fi
  mkdir -p target/sid-19
  session "$lower" "$PWD" "$@"
}

case "${1:-}" in
  make) [ "${2:-}" != sid-19 ] || { make_root_19; exit 0; }
        make_root "${2:?usage: $0 make SUITE}" ;;
  build) [ "${2:-}" = sid-19 ] || die "only sid-19 has a build root"
         shift 2; [ $# -gt 0 ] || die "usage: $0 build sid-19 CMD..."
         in_build_root "$@" ;;
  major) major_of "${2:?usage: $0 major SUITE}" ;;
  run) shift; in_root "${1:?usage: $0 run DIR CMD...}" "${@:2}" ;;
  *) echo "usage: $0 make SUITE | major SUITE | run DIR CMD... | build sid-19 CMD..." >&2; exit 2 ;;
esac
