#!/usr/bin/env bash
# own-dir.sh DIR...: makes each DIR a directory of postgres's (as root; else of the user's)
# that no other user can change, and refuses one that another user made. The clusters of
# `make test-pgrx` and of `make run` (as root, from a checkout postgres cannot enter) live under
# fixed names in /tmp, where anyone may create a name first: root would then chown, fill and
# run servers from a directory that user controls (a symlink swapped in would hand root's chown
# any file).
set -euo pipefail
for dir in "$@"; do
  # -m: the mode of a new directory whatever the umask (-p makes any missing parents too, with
  # the umask's mode: the checks below are of this directory alone).
  # shellcheck disable=SC2174
  mkdir -p -m 0755 "$dir"
  # Checked after mkdir, so that a directory made in between is checked too.
  owner=$(stat -c '%U' "$dir")
  mode=$(stat -c '%a' "$dir")
  # mutant: own_dir_owner
  # mutant: own_dir_mode
  if [ -L "$dir" ] || [ ! -d "$dir" ] \
     || { [ "$owner" != root ] && [ "$owner" != postgres ] && [ "$owner" != "$(id -un)" ]; } \
     || [ $(( 8#$mode & 8#022 )) -ne 0 ]; then
    echo "$0: $dir is not safe to use: it belongs to $owner (mode $mode) or is a symlink." >&2
    echo "Another user may have made it; remove it (as root) and run again." >&2
    exit 1
  fi
  # -h: were the name swapped for a symlink after the check, the link is changed, not its
  # target (no chmod: it would follow one).
  if [ "$(id -u)" -eq 0 ]; then chown -h postgres:postgres "$dir"; fi
done
