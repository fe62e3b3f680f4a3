#!/usr/bin/env bash
# Removes one guarantee at a time from the source and runs the tests, to show which tests fail
# without it: a guarantee that no test catches is a finding. Not part of `make test` (it builds
# the extension once per mutation); run it after changing a mechanism or its tests.
#
#   scripts/mutations.sh                       # every mutation, black-box suites on PostgreSQL 15
#   scripts/mutations.sh sync_wait wal_redo    # some
#
# Each mutation is a Perl substitution that must match exactly once; the source is restored
# from git afterwards (the tree must be clean). Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -z "$(git status --porcelain src sql)" ] || { echo "src/ or sql/ has uncommitted changes" >&2; exit 2; }

PG=${PG:-15}
export PG_CONFIG=${PG_CONFIG:-$(scripts/pg-config.sh "$PG")}
# Suites that can tell: the soak (60 s) and the JavaScript decoder test nothing these
# mutations touch; the README shows a time-range plan. pg_upgrade needs two majors (see the `upgrade` row).
SUITES=(--test restart --test crash --test clock --test standby --test sync_standby
        --test configuration --test concurrency --test burst --test toolkit
        --test extension_upgrade --test layouts --test readme --test multinode)
# pg_auto_failover is packaged for 15 only.
[ "$PG" != 15 ] || SUITES+=(--test auto_failover)

# name ~ file ~ perl substitution ~ what it removes
MUTATIONS=(
  "durable_mark~src/lease.rs~s/write_mark\(s, layout, mark\);/s.mark.store(mark, Ordering::Release);/~the mark is neither WAL-logged nor written to the state file"
  "wal_redo~src/wal.rs~s/Record::Mark\(mark\) => lease::replay_mark\(mark\),/Record::Mark(_) => {}/~WAL replay of marks (standbys, crash recovery)"
  "state_file~src/shared.rs~s/match state_file::read\(Path::new\(\".\"\)\) \{/match Ok::<_, state_file::ReadError>(state_file::Loaded::Missing) {/~the state file is not read at start"
  "clock_rule~src/layout.rs~s/let next = Tick\(if clocked > succ \{ clocked \} else \{ succ \}\);/let next = Tick(clocked);/~ids follow the clock back (no borrowing)"
  "standby_refusal~src/lease.rs~s/(pub fn cover.*?)if unsafe \{ pg_sys::RecoveryInProgress\(\) \} \{/\$1if false {/s~a standby is not refused"
  "sync_wait~src/sync_standby.rs~s/    if acknowledged\(lsn, format\) \{\n        return;\n    \}/    return;/~the lease does not wait for synchronous standbys"
  "sync_cancel~src/lease.rs~s/    sync_standby::wait_for_flush\(lsn\);\n    s.lease.fetch_max/    let _ = std::panic::catch_unwind(|| sync_standby::wait_for_flush(lsn));\n    s.lease.fetch_max/~a cancelled wait publishes the lease"
  "worker_unset~src/gucs.rs~s/worker_id: u32::try_from\(WORKER_ID.get\(\)\).ok\(\),/worker_id: Some(u32::try_from(WORKER_ID.get()).unwrap_or(0)),/~an unset worker id silently becomes 0"
  "pacing~src/generator.rs~s/if Pacer::applies\(layout, next, now, max_drift\) && !paced\(layout, now\) \{/if false {/~bursts are not paced"
  "floor_durable~src/floor.rs~s/    cover\(s, layout, units, now\);\n//~snowflake_advance_past() writes no durable mark"
  "adopt_floor~src/adopt.sql~s/        PERFORM \@extschema\@.snowflake_advance_past\(top\);/        NULL;/~snowflake_adopt() does not move the generator above the column"
  "update_script~sql/pg_snowflake--0.1.0--0.2.0.sql~s/GRANT EXECUTE ON FUNCTION snowflake_stats\(\) TO pg_monitor;\n//~the 0.1.0 -> 0.2.0 script forgets a grant"
  "ids_counted~src/generator.rs~s/    stats::count_id\(\);\n//~ids are not counted in the stats"
  "layout_refusal~src/lease.rs~s/if s.layout_differs.load\(Ordering::Acquire\) \{/if false {/~a layout change whose ids would go below the old ones is not refused"
  "time_ranges~src/lib.rs~s/    planner::init\(\);\n//~comparisons of snowflake_timestamp(id) are not turned into id ranges"
  "claims_worker~src/lib.rs~s/    claims::init\(\);\n//~no background worker writes the worker id claims"
  "claims_always~src/claims.sql~s/ALTER TABLE snowflake_claims ENABLE ALWAYS TRIGGER snowflake_claims_check;\n//~the clash trigger does not fire in logical replication's apply workers"
)

only=" $* "
rows=()
trap 'git checkout -q -- src sql' EXIT
for m in "${MUTATIONS[@]}"; do
  IFS='~' read -r name file subst what <<< "$m"
  [ "$only" = "  " ] || [[ "$only" == *" $name "* ]] || continue
  git checkout -q -- src sql
  count=$(perl -0777 -ne "\$n = ${subst}g; print \$n + 0" "$file")
  [ "$count" = 1 ] || { echo "mutation $name matches $count times in $file" >&2; exit 1; }
  perl -0777 -pi -e "$subst" "$file"
  echo "==> $name: $what" >&2
  cargo pgrx install --profile mutation --pg-config "$PG_CONFIG" >/dev/null 2>&1 \
    || { rows+=("| $name | $what | does not build |"); continue; }
  log=target/mutations/$name.log
  mkdir -p target/mutations
  # A mutation can make a test hang (a wait that nothing ends): 10 minutes at most.
  timeout 600 cargo test "${SUITES[@]}" --no-fail-fast -- --test-threads=2 >"$log" 2>&1 || true
  failed=$( { grep -E '^test .* FAILED$' "$log" | sed -E 's/^test (.*) \.\.\. FAILED$/\1/'
              grep -oE "deps/[a-z_]+-[0-9a-f]+ --test-threads=2\` \(signal" "$log" \
                | sed -E 's/^deps\/([a-z_]+)-.*/\1 (killed, did not finish)/'; } \
            | sort | paste -sd, - | sed 's/,/, /g' || true)
  rows+=("| $name | $what | ${failed:-none} |")
done
git checkout -q -- src sql
echo "| mutation | removes | black-box tests that fail (PostgreSQL $PG) |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "Reinstalling the unmutated release build" >&2
cargo pgrx install --release --pg-config "$PG_CONFIG" >/dev/null 2>&1
