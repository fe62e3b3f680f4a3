# shellcheck shell=bash
# Sourced by the scripts that build pg_snowflake outside make (package.sh, mutations.sh);
# the Makefile sets the same two variables for everything it runs.
#
# RUSTUP_TOOLCHAIN: pgrx 0.19.3 needs Rust 1.96 or later (scripts/toolchain.sh picks it).
if [ -z "${RUSTUP_TOOLCHAIN:-}" ]; then
  toolchain=$(scripts/toolchain.sh) || exit 1
  [ -z "$toolchain" ] || export RUSTUP_TOOLCHAIN=$toolchain
fi
# cargo-pgrx 0.19.3 links the library with --no-gc-sections (to keep its schema section, which
# this build keeps without it), and that keeps all of pgrx's 527 wrappers of PostgreSQL's static
# inline functions: one of them calls pg_mblen_cstr, which only 16.12 and later minors (15.16,
# 17.8, 18.2) export, so a library built against 16.14's headers refused to load on 16.2
# ("undefined symbol: pg_mblen_cstr"). With the linker's default the library keeps 2 wrappers
# and loads on every minor of its major (make test-old-flag).
export CARGO_PGRX_DISABLE_GC_SECTIONS_WORKAROUND=1
