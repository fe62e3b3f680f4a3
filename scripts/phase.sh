#!/usr/bin/env bash
# Where `make test`'s time goes. Each phase of it (a test layer of a major, an install, the
# Debian root of 19) begins with `scripts/phase.sh begin NAME`: the phase before it ends there,
# its time is printed and written to the table in $PG_SNOWFLAKE_PHASES. `make test` starts the
# table (`start`), ends the last phase (`end`) and prints the table (`table`): one row a phase,
# in the order they ran, with each major's total. Outside `make test` (no PG_SNOWFLAKE_PHASES)
# it does nothing.
set -euo pipefail
file=${PG_SNOWFLAKE_PHASES:-}
[ -n "$file" ] || exit 0
# A make below `make test` whose table is elsewhere (in the root of 19, target/ is another
# directory): its phases are the one phase that ran it.
[ "${1:-}" = start ] || [ -f "$file.now" ] || exit 0
now=$(date +%s)
case "${1:-}" in
  start) : > "$file"; echo "$now -" > "$file.now" ;;
  begin|end)
    read -r since name < "$file.now"
    if [ "$name" != - ]; then
      printf '%s\t%s\n' "$name" $((now - since)) >> "$file"
      printf '\033[1m==> %s took %s s\033[0m\n' "$name" $((now - since))
    fi
    echo "$now ${2:--}" > "$file.now"
    ;;
  table)
    # NAME is "MAJOR LAYER" (`15 test-blackbox`); the same phase twice adds up.
    awk -F'\t' '{ if (!($1 in secs)) order[n++] = $1; secs[$1] += $2
                   split($1, w, " "); major[w[1]] += $2; total += $2 }
                END { print "| phase | seconds |"; print "|---|---|"
                      for (i = 0; i < n; i++) print "| " order[i] " | " secs[order[i]] " |"
                      for (m in major) print "| " m ", all phases | " major[m] " |"
                      print "| all | " total " |" }' "$file"
    ;;
  *) echo "usage: $0 start | begin NAME | end | table" >&2; exit 2 ;;
esac
