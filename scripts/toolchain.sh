#!/usr/bin/env bash
# Prints the Rust toolchain that builds pg_snowflake: pgrx 0.19.3 needs Rust 1.96 or later.
# Stable when it is new enough, else the newest installed toolchain that is (a nightly, say).
# The Makefile exports it as RUSTUP_TOOLCHAIN, so that every cargo it runs, and cargo-pgrx's own
# calls to cargo, use the same one. RUSTUP_TOOLCHAIN already set picks one by hand.
set -euo pipefail
NEED_MINOR=96
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

minor_of() { # rustc's minor version of a toolchain, or nothing
  rustc +"$1" --version 2>/dev/null | sed -nE 's/^rustc 1\.([0-9]+)\..*/\1/p'
}
if [ -n "${RUSTUP_TOOLCHAIN:-}" ]; then
  m=$(minor_of "$RUSTUP_TOOLCHAIN")
  [ -n "$m" ] && [ "$m" -ge $NEED_MINOR ] ||
    { echo "$0: RUSTUP_TOOLCHAIN=$RUSTUP_TOOLCHAIN is not Rust 1.$NEED_MINOR or later (pgrx 0.19.3 needs it)" >&2; exit 1; }
  echo "$RUSTUP_TOOLCHAIN"; exit 0
fi
command -v rustup >/dev/null || {
  # No rustup: the one rustc on PATH must do.
  m=$(rustc --version 2>/dev/null | sed -nE 's/^rustc 1\.([0-9]+)\..*/\1/p')
  [ -n "$m" ] && [ "$m" -ge $NEED_MINOR ] ||
    { echo "$0: pg_snowflake needs Rust 1.$NEED_MINOR or later (pgrx 0.19.3); rustc says: $(rustc --version 2>&1)" >&2; exit 1; }
  exit 0
}
best='' best_minor=0
for t in stable $(rustup toolchain list | awk '{print $1}'); do
  m=$(minor_of "$t")
  [ -n "$m" ] || continue
  if [ "$t" = stable ] && [ "$m" -ge $NEED_MINOR ]; then echo stable; exit 0; fi
  if [ "$m" -gt "$best_minor" ]; then best=$t best_minor=$m; fi
done
[ -n "$best" ] && [ "$best_minor" -ge $NEED_MINOR ] || {
  echo "$0: pg_snowflake needs Rust 1.$NEED_MINOR or later (pgrx 0.19.3); the newest installed is 1.$best_minor ($best): rustup toolchain install stable" >&2
  exit 1; }
echo "$best"
