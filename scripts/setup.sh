#!/usr/bin/env bash
# Installs what a make target needs, and nothing that is already there: a second run takes
# about a second. The Makefile calls it; it can also run on its own.
#
#   scripts/setup.sh build 15            # building and installing: cargo-pgrx, libclang, a C
#   scripts/setup.sh build --pg-config P #   toolchain, `cargo pgrx init` (for P's major)
#   scripts/setup.sh run 17              # build, and the server of that major (make run, bench)
#   scripts/setup.sh image 18            # run, and umoci and skopeo (make image)
#   scripts/setup.sh test 15 16 17 18    # run, and what the tests use (make test)
#   scripts/setup.sh test 19             # on this host: the Debian roots (19 runs in one); in
#                                        #   the build root of 19: what building and testing need
#
# What each adds:
#   build  Debian packages: libclang-dev (bindgen), build-essential, pkg-config; cargo-pgrx
#          0.19.3 (the first with PostgreSQL 19; it needs Rust 1.96, see scripts/toolchain.sh),
#          built with that toolchain (about 5 minutes the first time on 2 cores); `cargo pgrx
#          init` with local pg_configs only, never a downloaded PostgreSQL. With
#          --pg-config, nothing else: the server is yours. Without it, the major's server
#          headers: Debian's postgresql-server-dev-15, or for 16-18 the whole local package of
#          scripts/build-postgres.sh (its headers come with it).
#   run    the server: 15 from Debian's packages; 16, 17 (assert-enabled) and 18 by
#          scripts/build-postgres.sh, from pinned releases, as local packages laid out as
#          Debian's in /usr/lib/postgresql/N (2.5 to 3.5 minutes each for 17 and 18 on 2
#          cores, the first time; seconds for 16)
#   image  umoci, which makes the extension image (scripts/image.sh), and skopeo, which copies
#          it to a registry
#   test   umoci and skopeo (the extension image's test), sudo (cargo pgrx test --runas),
#          libfaketime (clock tests), node and npm with the packages of tests/js and the Python
#          clients of tests/clients (the decoder and client tests), Ruby's ActiveRecord, Go with pgx
#          and Java's JDBC driver from Debian (the client tests), pg_auto_failover for 15 (the
#          failover test), pgspot in target/venv (the SQL scripts' lint), fuse3 (the power-loss
#          tests' file system), lintian (the package tests), etcd and Patroni (the Patroni failover
#          test), 16.2 beside 16 (the old synchronous-standby flag), debootstrap and the Debian
#          roots of scripts/debian-root.sh, gnupg and dpkg-dev (the apt repository's test), valgrind
#          (the hot path's cost budget, scripts/callgrind.sh), shellcheck and pyflakes3 (make lint
#          of the scripts), liblz4-dev and libzstd-dev and Citus, built into each major by
#          scripts/build-citus.sh from a vendored archive (the Citus suite; about a minute a major
#          the first time, then a stamp; where no archive is found it says how to get one, and only
#          the Citus suite fails)
#
# PostgreSQL 19: Debian packages it only for sid (experimental's 19~rc1, which needs sid's libc
# 6 2.43; this host's is 2.36), and its source is not served. It is built and tested in the build
# root of scripts/debian-root.sh (`make test PG=19` goes there): on this host `setup.sh test 19`
# makes the Debian roots (and the root of 19 with its build layer) and installs cargo-pgrx;
# run inside that root, it installs there what the tests use, as on this host for the other
# majors, with the root's own Debian 18 and 19 as the servers (nothing is built from source).
#
# On a system without apt-get it installs nothing: it names what is missing and stops.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: $0 build|run|image|test [--pg-config PATH] [MAJOR...]" >&2; exit 2; }
PURPOSE=${1:-}; shift || true
case "$PURPOSE" in build|run|image|test) ;; *) usage ;; esac
PG_CONFIG_GIVEN=
MAJORS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --pg-config) PG_CONFIG_GIVEN=${2:?--pg-config needs a path}; shift 2 ;;
    [0-9]*) MAJORS+=("$1"); shift ;;
    *) usage ;;
  esac
done
SUPPORTED=(15 16 17 18 19)
PGRX_VERSION=0.19.3
# Inside the build root of 19 (scripts/debian-root.sh build sid-19), whose servers are Debian's
# own 18 and 19; on this host, 19 is made as that root.
IN_ROOT_19=; case "$(cat /.pg_snowflake-root 2>/dev/null)" in "sid-19 "*) IN_ROOT_19=1 ;; esac
ROOT_19=

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf '%s: %s\n' "$0" "$*" >&2; exit 1; }
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

# A pg_config the user named: check it before anything else, and learn its major.
if [ -n "$PG_CONFIG_GIVEN" ]; then
  path=$(command -v "$PG_CONFIG_GIVEN" || true)
  [ -n "$path" ] && [ -x "$path" ] ||
    die "PG_CONFIG=$PG_CONFIG_GIVEN is not an executable pg_config (give the full path to the pg_config of the PostgreSQL to install into)"
  version=$("$path" --version 2>/dev/null) || die "$path --version failed: is it a pg_config?"
  major=$(sed -nE 's/^PostgreSQL ([0-9]+).*/\1/p' <<< "$version")
  # psql, postgres and pg_ctl answer --version too ("psql (PostgreSQL) 16.2"): say what to name.
  [ -n "$major" ] || die "PG_CONFIG=$PG_CONFIG_GIVEN is not a pg_config: it says \"$version\". Name the pg_config of the server (pg_config --version says \"PostgreSQL 16.2\"), such as $(dirname "$path")/pg_config"
  printf '%s\n' "${SUPPORTED[@]}" | grep -qx "$major" ||
    die "$path is PostgreSQL $major; pg_snowflake supports ${SUPPORTED[*]}"
  MAJORS=("$major")
fi
[ ${#MAJORS[@]} -gt 0 ] || MAJORS=(15 16 17 18)
for v in "${MAJORS[@]}"; do
  printf '%s\n' "${SUPPORTED[@]}" | grep -qx "$v" ||
    die "PostgreSQL $v is not supported (supported: ${SUPPORTED[*]}; 13 and 14 lack custom WAL resource managers)"
done
has() { printf '%s\n' "${MAJORS[@]}" | grep -qx "$1"; }
# cargo-pgrx, unless this version is there. Built without optimisation (cargo install --debug):
# 1 min 24 s on 2 cores where a release build took 3 min 7 s, and what it does is mostly wait on
# cargo and copy files (a `cargo pgrx install` that generates the schema took 20.6 s with it,
# 19.0 s with the release build, here).
install_cargo_pgrx() {
  if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
    say "installing cargo-pgrx $PGRX_VERSION (about 90 seconds on 2 cores)"
    cargo install cargo-pgrx --version "=$PGRX_VERSION" --locked --debug
  fi
}
if [ -n "$IN_ROOT_19" ]; then
  for v in "${MAJORS[@]}"; do
    case "$v" in 18|19) ;; *) die "the build root of 19 has Debian's 18 and 19 only, not $v" ;; esac
  done
elif has 19 && [ -z "$PG_CONFIG_GIVEN" ]; then
  # This host builds nothing for 19: `make test` makes the root of 19 here, and the root's own
  # setup installs the rest there.
  [ "$PURPOSE" = test ] || die "PostgreSQL 19 is not packaged for Debian 12 (only Debian experimental's binaries, built for sid's libc 2.43, exist): \
make test PG=19 tests it in a Debian sid root (scripts/debian-root.sh build sid-19 make ... runs any target there); \
to install into a PostgreSQL 19 of your own, name its pg_config: make install PG_CONFIG=/path/to/pg_config"
  ROOT_19=1
  rest=(); for v in "${MAJORS[@]}"; do [ "$v" = 19 ] || rest+=("$v"); done
  MAJORS=("${rest[@]}")
  if [ ${#MAJORS[@]} -eq 0 ]; then
    SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    need=()
    for p in debootstrap curl ca-certificates; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
    done
    if [ ${#need[@]} -gt 0 ]; then
      say "installing Debian packages: ${need[*]}"
      $SUDO apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
    command -v cargo >/dev/null || die "cargo is missing: install Rust 1.96 or later (https://rustup.rs)"
    toolchain=$(scripts/toolchain.sh) || exit 1
    [ -z "$toolchain" ] || export RUSTUP_TOOLCHAIN=$toolchain
    install_cargo_pgrx
    # The root of 19 (from sid's) with its build layer.
    scripts/debian-root.sh build sid-19 true
    exit 0
  fi
fi

# Debian packages, by purpose and major.
PACKAGES=(libclang-dev build-essential pkg-config curl ca-certificates python3)
if [ -z "$PG_CONFIG_GIVEN" ] && [ -z "$IN_ROOT_19" ]; then
  ! has 15 || PACKAGES+=(postgresql-server-dev-15)
  for v in 17 18; do ! has $v || { PACKAGES+=(bison flex libssl-dev zlib1g-dev bzip2); break; }; done
  ! has 16 || PACKAGES+=(python3 python3-pip patchelf)
fi
if [ "$PURPOSE" != build ]; then
  # postgresql-common makes the postgres user, which runs every server (PostgreSQL refuses
  # root); Debian's 15 brings it, this project's 16-18 packages do not.
  PACKAGES+=(procps postgresql-common)
  ! has 15 || PACKAGES+=(postgresql-15)
fi
# umoci: the extension image (scripts/image.sh); skopeo: copies it to a registry, and its test
# reads it as a registry client does.
[ "$PURPOSE" != image ] || PACKAGES+=(umoci skopeo)
if [ "$PURPOSE" = test ]; then
  PACKAGES+=(umoci skopeo)
  # iproute2: the network namespaces of tests/replication/worker_ids_from_addresses.rs.
  PACKAGES+=(sudo faketime libfaketime python3-venv fuse3 lintian iproute2)
  # The Debian roots of tests/packaging/debian.rs and tests/packaging/repo.rs, and the repository of scripts/repo.sh.
  PACKAGES+=(debootstrap gnupg dpkg-dev)
  # What only suites that do not run on 19 use (their `//! Majors:` lines, scripts/test-suites.py):
  # the root of 19 goes without, which saves a fresh machine minutes of installs.
  if [ -z "$IN_ROOT_19" ]; then
    # valgrind: the hot path's budget, counted on 15 only (make test-hotpath); shellcheck and
    # pyflakes3: make lint of the shell and Python scripts, once per make test, on this host.
    PACKAGES+=(valgrind shellcheck pyflakes3)
    # node: the client recipes and the decoder of tests/ids/decoder_js.rs; etcd: Patroni's.
    PACKAGES+=(nodejs npm etcd-server)
    # Citus's build (scripts/build-citus.sh): its compression libraries' headers, and for
    # Debian's 15, built with GSSAPI, the headers its server headers include (gssapi/gssapi.h).
    PACKAGES+=(liblz4-dev libzstd-dev)
    ! has 15 || PACKAGES+=(libkrb5-dev)
    # The clients of docs/clients.md that Debian packages: ActiveRecord, Go with pgx, JDBC.
    PACKAGES+=(ruby-activerecord ruby-pg golang-go golang-github-jackc-pgx-v4-dev
               default-jdk-headless libpostgresql-jdbc-java)
  fi
  ! has 15 || PACKAGES+=(postgresql-15-auto-failover pg-auto-failover-cli)
fi

if command -v dpkg-query >/dev/null && command -v apt-get >/dev/null; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # Tools that may come from elsewhere than Debian (this machine has them under /usr/local).
  keep=()
  for p in "${missing[@]}"; do
    case "$p" in
      nodejs) command -v node >/dev/null || keep+=("$p") ;;
      npm) command -v npm >/dev/null || keep+=("$p") ;;
      python3) command -v python3 >/dev/null || keep+=("$p") ;;
      python3-pip) python3 -m pip --version >/dev/null 2>&1 || keep+=("$p") ;;
      # Patroni's environment is made with Debian's own python3 (see tests/clients/install.sh).
      python3-venv) /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || keep+=("$p") ;;
      *) keep+=("$p") ;;
    esac
  done
  if [ ${#keep[@]} -gt 0 ]; then
    say "installing Debian packages: ${keep[*]}"
    SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${keep[@]}" >/dev/null
  fi
else
  # No apt (an RPM system, say): check the tools building needs and say which are missing.
  lacking=()
  command -v cc >/dev/null || lacking+=("a C compiler (gcc)")
  command -v make >/dev/null || lacking+=("make")
  command -v pkg-config >/dev/null || command -v pkgconf >/dev/null || lacking+=("pkg-config")
  { [ -n "${LIBCLANG_PATH:-}" ] || ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so' ||
    compgen -G '/usr/lib*/llvm*/lib*/libclang*.so*' >/dev/null || compgen -G '/usr/lib*/libclang*.so*' >/dev/null; } ||
    lacking+=("libclang (Fedora, RHEL: clang-devel; or set LIBCLANG_PATH)")
  [ "$PURPOSE" = build ] && [ -n "$PG_CONFIG_GIVEN" ] ||
    lacking+=("apt-get: make $PURPOSE installs PostgreSQL and test tools from Debian's packages; on this system use make install PG_CONFIG=/path/to/pg_config")
  if [ ${#lacking[@]} -gt 0 ]; then
    printf '%s: missing:\n' "$0" >&2; printf '  - %s\n' "${lacking[@]}" >&2; exit 1
  fi
fi
command -v cargo >/dev/null || die "cargo is missing: install Rust 1.96 or later (https://rustup.rs)"
# pgrx 0.19.3 needs Rust 1.96: the toolchain that is new enough (the Makefile exports it too).
toolchain=$(scripts/toolchain.sh) || exit 1
[ -z "$toolchain" ] || export RUSTUP_TOOLCHAIN=$toolchain

# PostgreSQL majors that Debian 12 does not package (in the root of 19, Debian's own are there).
if [ -z "$PG_CONFIG_GIVEN" ] && [ -z "$IN_ROOT_19" ]; then
  for v in "${MAJORS[@]}"; do
    [ "$v" = 15 ] || scripts/build-postgres.sh "$v"
  done
fi
if [ "$PURPOSE" = test ]; then
  # Citus for tests/replication/citus.rs (and docs/citus.md's examples, run on 17), into the
  # servers of the majors that the suite's `//! Majors:` line names.
  # (No mark would mean every major.)
  citus_majors=" $(scripts/test-suites.py --majors-of tests/replication/citus.rs) "
  [ "$citus_majors" != "  " ] || citus_majors=" ${MAJORS[*]} "
  for v in "${MAJORS[@]}"; do
    case "$citus_majors" in *" $v "*) scripts/build-citus.sh --missing-ok "$v" ;; esac
  done
  # 16.2 beside 16, for the synchronous-standby flag format from before May 2025 (make test-old-flag).
  [ -n "$IN_ROOT_19" ] || ! has 16 || scripts/build-postgres.sh 16-old
  # Debian's own PostgreSQL in Debian roots, made once per machine: trixie (Debian 13) for 17
  # and the setup scripts' test (which runs on 17); sid for 18.
  ! has 17 || scripts/debian-root.sh make trixie >/dev/null
  ! has 18 || scripts/debian-root.sh make sid >/dev/null
  # In the root of 19, these are the host's, mounted read-only: made (or checked) as above.
  ! has 19 || scripts/debian-root.sh make sid-19 >/dev/null
  [ -z "$ROOT_19" ] || scripts/debian-root.sh build sid-19 true
fi

install_cargo_pgrx

# Rewriting ~/.pgrx/config.toml forces a rebuild of pgrx-pg-sys: only init when a major is
# missing (or its pg_config is not where this project puts it), and then with every major
# already there too (init forgets the ones it is not given).
config="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
args=(); new=()
for v in "${SUPPORTED[@]}"; do
  old=$(sed -nE "s/^pg$v = \"(.*)\"/\1/p" "$config" 2>/dev/null || true)
  # In the root of 19, Debian's 18 and 19 are both pointed at at once: each later init would
  # rewrite the file (and rebuild the bindings).
  if has "$v" || { [ -n "$IN_ROOT_19" ] && [ -z "$PG_CONFIG_GIVEN" ] && [ -x "$(scripts/pg-config.sh "$v")" ]; }; then
    path=${PG_CONFIG_GIVEN:-$(scripts/pg-config.sh "$v")}
    # A user's own pg_config for a major pgrx already knows keeps the old one: bindings are
    # the major's, and cargo pgrx install is told which server to install into.
    if [ -z "$old" ] || { [ -z "$PG_CONFIG_GIVEN" ] && [ "$old" != "$path" ]; }; then
      new+=("$v"); old=$path
    fi
    args+=("--pg$v" "$old")
  elif [ -n "$old" ]; then
    args+=("--pg$v" "$old")
  fi
done
if [ ${#new[@]} -gt 0 ]; then
  say "pointing pgrx at PostgreSQL ${new[*]}"
  cargo pgrx init "${args[@]}"
fi

[ "$PURPOSE" = test ] || exit 0

# Python tools of the tests, pinned with their dependencies, in a virtual environment of the
# checkout; installed again when the pins change.
PYTHON_TOOLS=(pgspot==0.9.4 pglast==7.21)
if ! [ "$(target/venv/bin/python -m pip freeze 2>/dev/null | sort)" = \
       "$(printf '%s\n' "${PYTHON_TOOLS[@]}" | sort)" ]; then
  say "installing ${PYTHON_TOOLS[*]} into target/venv"
  rm -rf target/venv && python3 -m venv target/venv
  target/venv/bin/python -m pip install --quiet "${PYTHON_TOOLS[@]}"
fi

# The Python and JavaScript clients of docs/clients.md and the decoder of tests/ids/decoder_js.rs,
# pinned (tests/clients/requirements.txt, tests/js/package-lock.json), and Patroni: not in the root
# of 19, where none of their suites runs.
[ -n "$IN_ROOT_19" ] || tests/clients/install.sh
