#!/usr/bin/env bash
# Removes one guarantee at a time from the source and runs the tests, to show which tests fail
# without it: a guarantee that no test catches is a finding. Not part of `make test` (it builds
# the extension once per mutation); run it after changing a mechanism or its tests.
#
#   scripts/mutations.sh                       # every mutation, black-box suites on PostgreSQL 15
#   scripts/mutations.sh sync_wait wal_redo    # some
#   MUTATION_SUITES=known scripts/mutations.sh # each row against the tests that caught it
#                                              #   before (docs/testing.md lists them)
#   scripts/mutations.sh --check               # that every row has its place in the tree and
#                                              #   that docs/testing.md's table lists the rows,
#                                              #   no build (seconds; `make test` runs it first)
#   scripts/mutations.sh --list                # name and what it removes, one row a line
#
# A guard in Rust is a mutation point in the code: `mutant!(name, { kept }, { removed })`, or
# `mutant_text!(STATEMENT, name: "from" => "to")` for a clause of an SQL statement the extension
# runs (core/src/mutant.rs). Its row here is its name and what it removes; the build of the row
# sets PG_SNOWFLAKE_MUTANT=name, which compiles the removed branch. Both branches compile in
# every build, so the compiler keeps each such row true to the code.
# Where no macro reaches (the SQL scripts, shell and Python), a guard is named at its place by a
# comment `mutant: NAME` (above the SQL statement or shell statement that holds it), and its row
# adds what to change there: Perl substitutions, each of which must match exactly once in the
# files that hold the marker (`--check` sees that they still do). The source is restored from git
# afterwards (the tree must be clean). Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
# The build's toolchain and link (the Makefile sets the same).
. scripts/build-env.sh
# name ~ what it removes [~ perl substitution ~ ...]: with no substitution, a mutation point in
# the Rust code
MUTATIONS=(
  "durable_mark~the mark is neither WAL-logged nor written to the state file"
  "wal_redo~WAL replay of marks (standbys, crash recovery)"
  "state_file~the state file is not read at start"
  "clock_rule~ids follow the clock back (no borrowing)"
  "cas~the tick moves by a plain load and store instead of compare-and-swap"
  "standby_refusal~a standby is not refused (and makes ids without WAL, which it cannot write)"
  "not_carried~a cluster made by pg_upgrade without the old mark is not refused (run with PG=18)"
  "renewal_lock~renewals do not take the renewal lock"
  "sync_wait~the lease does not wait for synchronous standbys"
  "sync_cancel~a cancelled wait publishes the lease"
  "worker_unset~an unset worker id silently becomes 0"
  "pacing~bursts are not paced"
  "floor_durable~snowflake_advance_past() writes no durable mark"
  "adopt_floor~snowflake_adopt() does not move the generator above the column"
  "ids_counted~ids are not counted in the stats"
  "layout_refusal~a layout change whose ids would go below the old ones is not refused"
  "time_ranges~comparisons of snowflake_timestamp(id) are not turned into id ranges"
  "claims_worker~no background worker writes the worker id claims"
  "claims_always~the clash trigger does not fire in logical replication's apply workers~s/ALTER TABLE snowflake.snowflake_claims ENABLE ALWAYS TRIGGER snowflake_claims_check;\n//"
  "claims_trigger_path~the claims trigger searches the extension's schema before pg_catalog, its operators unqualified (0.2.0)~s/SET search_path = pg_catalog, pg_temp\nAS \\\$check/SET search_path = \@extschema\@, pg_catalog, pg_temp\nAS \\\$check/~s/WHERE o.worker_id OPERATOR\(pg_catalog.=\) NEW.worker_id/WHERE o.worker_id = NEW.worker_id/"
  "text_arg~text arguments are checked as UTF-8 with a panic (XX000), as pgrx's &str does"
  "worker_defaults~the claims worker keeps the database's default_transaction_read_only"
  "default_privileges~the grants that default privileges made are not taken back~s/            EXECUTE pg_catalog.format\(\x27REVOKE ALL ON %s FROM %s\x27, object_.name,/            CONTINUE; EXECUTE pg_catalog.format(\x27REVOKE ALL ON %s FROM %s\x27, object_.name,/"
  "superuser_check~snowflake_reset_layout() and snowflake_claim() do not check for a superuser"
  "written_settings~a setting PostgreSQL cannot parse is replaced by its default"
  "epoch_parser~an error of the timestamp parser is not caught (it ended the start with FATAL)"
  "backtraces~Rust backtraces are not turned off"
  "state_file_first~the mark goes to WAL before the state file is written"
  "claims_restart~the claims worker ends for good when it is terminated"
  "pacing_slots~pacing slots are not limited to the clock's rate (every paced caller may go at once)"
  "pacing_pull_back~the pacing slot counter is never pulled back (a backward step or abandoned slots push every later turn back)"
  "pacing_bound~a wait for a pacing slot is not bounded by drift_wait"
  "nap_count~a call that used up drift_wait counts in the stats a nap it never took"
  "pacing_exit~a process that a FATAL ends inside its wait for a pacing slot keeps its count of waiting callers"
  "data_dir_open~a directory in the data directory is opened by following a link and waiting on a FIFO"
  "data_dir_replace~a link, file or FIFO under the copy's directory's name is left there (every renewal then fails)"
  "registry_notices~libpq prints the registry's notices whole into the server log"
  "registry_require_auth~with libpq 16 and later the member sends its password in clear text to whoever asks (no require_auth; run with PG=17)"
  "registry_cleartext_warning~with an older libpq the member says nothing of sending its password in clear text"
  "registry_resolve~libpq resolves the registry's host name, blocking a fast shutdown"
  "registry_secrets~the secrets of snowflake.registry are masked only where a pattern shows them"
  "planner_sublink~a sub-select compared with = goes into two bounds (two runs, two answers)"
  "planner_execute~the hook rewrites for a role that may not execute snowflake_id_bound"
  "planner_partial_index~a comparison a partial index's predicate matches is replaced by the range"
  "data_file_type~files in the data directory are read whatever they are (a FIFO, a device)"
  "planner_keep~the hook replaces the comparison also where a table needs it (partitioning, an expression index)"
  "planner_guards~the id ranges do not leave out the ids the layout cannot hold"
  "planner_volatile~a volatile argument is copied into the bounds"
  "planner_64bit~the hook rewrites under a 64-bit layout too"
  "planner_acl~the hook looks snowflake_id_bound up with the current user's rights"
  "planner_full_join~the conditions of a FULL JOIN's ON are turned into id ranges too (0.4.0)"
  "timestamp_null~snowflake_timestamp() of a bigint the layout cannot hold is an error, not NULL (0.4.0)"
  "state_file_sync~the new state file is renamed into place without being synced first"
  "state_dir_sync~the directory is not synced after the rename of the state file"
  "publish_early~a renewal publishes the new lease before it is durable"
  "state_file_errors~a failure to put the state file in place is ignored"
  "registry_floor~a reused worker id does not start above its previous holder's coverage"
  "registry_ceiling~ids go on past the registry's lease (no ceiling)"
  "registry_cache~the cached lease is not used at start"
  "registry_exclusive~the registry takes over a worker id whose lease has not run out~s/\n       AND g.expires OPERATOR\(pg_catalog.<\) pg_catalog.now\(\)\n    RETURNING/\n    RETURNING/"
  "registry_lock_wait~a call to the registry waits as long as another member's open transaction holds a row~s/    PERFORM pg_catalog.set_config\(\x27lock_timeout\x27, \x27200ms\x27, true\);\n//"
  "registry_take_locks~taking a worker id locks the row of the cluster that holds it~s/    ON CONFLICT DO NOTHING\n    RETURNING g.worker_id/    ON CONFLICT ON CONSTRAINT snowflake_registry_pkey DO UPDATE SET renewed = g.renewed WHERE false\n    RETURNING g.worker_id/"
  "registry_lost~a server whose worker id went to another cluster is not told"
  "registry_problem_once~a registry's error longer than the kept 511 bytes is logged at every attempt"
  "claims_bindings_kept~which cluster each Citus node speaks for is kept in the claims worker's memory only (a restart forgets it)"
  "claims_replaced~a Citus node's answer adds to what this node held of its cluster instead of replacing it"
  "claims_log_rate~a Citus node's unread answer is logged whenever its words change (a line a gathering)"
  "registry_secret~a renewal needs no secret: any start of a cluster renews the lease another start of it holds~s/ELSE o.secret OPERATOR\(pg_catalog.=\) ANY \(ARRAY\[secret_check, next_check\]\)/ELSE true/"
  "registry_secret_rotated~the secret a lease is renewed with is never replaced~s/           secret = next_check, place = COALESCE\(place_check, g.place\)/           secret = g.secret, place = COALESCE(place_check, g.place)/"
  "registry_in_place~a new start at its data directory's place does not resume its worker id~s/                   AND o.place OPERATOR\(pg_catalog.=\) place_check/                   AND false/"
  "registry_copy_of~a start that asks for another start's worker id of its cluster is not told which~s/          INTO other\n          FROM snowflake.snowflake_registry g\n         WHERE g.namespace OPERATOR\(pg_catalog.=\) namespace\n           AND g.worker_id OPERATOR\(pg_catalog.=\) first_choice/          INTO other\n          FROM snowflake.snowflake_registry g\n         WHERE false AND g.namespace OPERATOR(pg_catalog.=) namespace\n           AND g.worker_id OPERATOR(pg_catalog.=) first_choice/"
  "registry_release~a lease given back at a clean shutdown runs on~s/               expires = LEAST\(g.expires, pg_catalog.now\(\)\),/               expires = g.expires,/"
  "registry_release_resumed~a lease resumed by its place and given back lowers the coverage of the start it cut off~s/covered_until_ms = GREATEST\(g.start_above_ms, g.resumed_above_ms,/covered_until_ms = GREATEST(g.start_above_ms,/"
  "ahead_because~a next holder waiting for its previous holder's ids says the clock is behind"
  "address_hold~a worker id from an address is not held in the network namespace"
  "address_reuse~a worker id from an address starts at the clock, below what the address's previous server made"
  "address_gone~an address that stops being the server's while it runs is not noticed"
  "address_none~a server with no address in the network takes worker id 0"
  "address_several~a server with several addresses in the network takes the lowest one's worker id"
  "network_width~a network larger than the layout's worker ids is not refused"
  "registry_release_cache~a lease given back stays in the cache, for a start in place to use"
  "release_bound~a lease given back records none of the ids made under it"
  "release_at_stop_only~a registry worker terminated alone gives its lease back"
  "registry_previous_secret~a registry that lost the last renewal is not asked with the secret before"
  "cache_place~a cached lease is used wherever the data directory starts (a copy, a restore)"
  "claims_place~a claim names no place: a copy of a data directory claims under its original's key"
  "claims_followed~a standby promoted after its primary's last claim clashes with it (the clash trigger takes every overlap of one cluster's claims for a clash)~s/           AND \(o.system_identifier OPERATOR\(pg_catalog.<>\) NEW.system_identifier\n                OR \(o.last_seen OPERATOR\(pg_catalog.>\) NEW.since\n                    AND NEW.last_seen OPERATOR\(pg_catalog.>\) o.since\)\)\n//"
  "claims_followed_view~snowflake_clashes lists a standby promoted after its primary's last claim as a clash with it~s/   AND \(a.system_identifier OPERATOR\(pg_catalog.<>\) b.system_identifier\n        OR \(a.last_seen OPERATOR\(pg_catalog.>\) b.since\n            AND b.last_seen OPERATOR\(pg_catalog.>\) a.since\)\);/;/"
  "claims_merge~a claim that arrives by logical replication for a key the table holds fails on the primary key~s/CREATE TRIGGER snowflake_claims_merge BEFORE INSERT OR UPDATE ON snowflake.snowflake_claims\nFOR EACH ROW EXECUTE FUNCTION snowflake.snowflake_claims_merge\(\);\nALTER TABLE snowflake.snowflake_claims ENABLE ALWAYS TRIGGER snowflake_claims_merge;//"
  "claims_echo~a replicated claim update no newer than the row is applied (two peers without a row filter send a claim back and forth endlessly)~s/        IF NEW.last_seen OPERATOR\(pg_catalog.<=\) OLD.last_seen THEN\n            RETURN NULL;\n        END IF;\n//"
  "settings_trimmed~a layout name with a trailing space is trimmed, in the setting (PostgreSQL refuses it, and runs twitter) and in snowflake_decode(id, layout)"
  "own_schema_owner~the schema snowflake belongs to the database owner, who may rename it~s/        CREATE SCHEMA snowflake;/        CREATE SCHEMA snowflake AUTHORIZATION pg_database_owner;/"
  "own_schema_taken~a schema snowflake that another role made first is taken over~s/        RAISE EXCEPTION 'schema \"snowflake\" already exists'/        RAISE NOTICE 'schema \"snowflake\" already exists'/~s/    IF own IS NULL THEN/    IF false THEN/~s/       AND COALESCE\(/       AND false AND COALESCE(/"
  "own_schema_check~the claims worker and snowflake_claim() do not check who owns the schema snowflake"
  "claims_trigger_owner~the claims trigger does not check who owns the schema snowflake~s/    IF NOT EXISTS \(SELECT FROM pg_catalog.pg_namespace n/    IF false AND NOT EXISTS (SELECT FROM pg_catalog.pg_namespace n/"
  "registry_owner~the lease function does not check who owns the schema snowflake~s/    IF NOT EXISTS \(SELECT FROM pg_catalog.pg_namespace n/    IF false AND NOT EXISTS (SELECT FROM pg_catalog.pg_namespace n/"
  "member_gate~a member calls and trusts any snowflake.snowflake_registry_lease (an impostor's)"
  "registry_negative~the registry records a negative coverage~s/       OR covered_until_ms OPERATOR\(pg_catalog.<\) 0\n//~s/ CHECK \(covered_until_ms OPERATOR\(pg_catalog.>=\) 0\)//"
  "registry_shorten~a renewal can move a lease's expiry earlier~s/\n           expires = GREATEST\(g.expires, pg_catalog.now\(\) OPERATOR\(pg_catalog.\+\) lease_for\),/\n           expires = pg_catalog.now() OPERATOR(pg_catalog.+) lease_for,/"
  "registry_holder~members are told which cluster holds a worker id~s/CASE WHEN pg_catalog.pg_has_role\(SESSION_USER, 'pg_monitor', 'USAGE'\)/CASE WHEN true/"
  "registry_layout~a namespace leases to members of any layout~s/    IF space.epoch_ms OPERATOR\(pg_catalog.<>\) epoch_ms/    IF false AND space.epoch_ms OPERATOR(pg_catalog.<>) epoch_ms/"
  "adopt_plan_guard~the largest id is read through the table's name, whatever it leads to"
  "adopt_check~adopt's statements by name are not checked by OID afterwards"
  "adopt_rls~adopt takes the largest id that row-level security lets the table's owner see"
  "adopt_advance_grant~adopt moves the generator for a role without EXECUTE on snowflake_advance_past"
  "scripts_check~the install and upgrade scripts do not check by OID that every object ended in the extension's schemas~s/    IF stray IS NOT NULL THEN/    IF false THEN/"
  "registry_wait_latch~the member's wait for the registry does not end at a shutdown"
  "wait_event_names~a wait shows the event Extension on 17 and later, not pg_snowflake's own names (run with PG=18)"
  "pin_schema~the scripts do not lock their schema's row (a rename on 16 and later then sends their grants elsewhere; run with PG=18)~s/\n       FOR UPDATE;/;/"
  "adopt_as_owner~adopt reads the largest id with the caller's rights (a table owner's index code then runs as a superuser)"
  "adopt_snapshot~adopt reads the largest id with the caller's snapshot (REPEATABLE READ misses rows committed since)"
  "registry_skip~a worker id passed over (its row not committed) hides those above it~s/                UNION ALL\n                -- One past a worker id passed over[^\n]*\n                SELECT k OPERATOR\(pg_catalog.\+\) 1 FROM pg_catalog.unnest\(skipped\) k\n                 WHERE k OPERATOR\(pg_catalog.<\) max_worker\) c/) c/"
  "member_types~the member's check names the lease function's types by the registry's search_path"
  "wal_flush~the mark record is not flushed before the lease is used"
  "renewal_wait~callers that need the next lease wait for the renewal lock in LWLockAcquire, where interrupts are held (0.3.0)"
  "worker_leaves~a background worker asked to stop keeps waiting for a renewal"
  "write_retry~every call that needs a lease tries the failing disk again (no failure is remembered)"
  "state_copy~the mark is not written to its copy"
  "copy_read~the copy of the mark is not read at start"
  "lost_refusal~an empty state file without a copy is taken for a data directory that never made an id (0.3.0)"
  "fetch_checksum~a download with the wrong sha256 falls back to the next listed release~s/    \} >&2\n    exit 1\n  fi\n  archive=/    } >\&2\n    return 1\n  fi\n  archive=/"
  "own_dir_owner~own-dir.sh takes a directory another user made in /tmp~s/     \|\| \{ \[ \x22\\\$owner\x22 != root \][^\n]*\n//"
  "own_dir_mode~own-dir.sh takes a directory of root's that others may write~s/ \\\\\n     \|\| \[ \\\$\(\( 8#\\\$mode & 8#022 \)\) -ne 0 \]//"
  "leftovers~directories that ended test runs left behind are kept for good (run with PG=17)"
  "suite_marks~a line that starts like a suite's //! Majors: mark but is none runs the suite on every major (run with PG=17)~s/    bad = \[l for l in lines if not MAJORS_MARK.match\(l\)\]/    bad = []\n    lines = [l for l in lines if MAJORS_MARK.match(l)]/"
  "test_lanes~suites that run side by side take their ports from one range"
  "foreign_postgres~PG=N replaces a postgresql-N that this project did not install~s/\nif \[ -n \x22\\\$foreign\x22 \]; then/\nif false; then/"
  "repo_signature~the apt repository's Release is signed neither inline (InRelease) nor apart (Release.gpg) (run with PG=17)~s/gpg_ --local-user \x22\\\$fingerprint\x22 --clearsign[^\n]*\ngpg_ --local-user[^\n]*\n//"
  "flag_format_bool~the synchronous-standby flag of servers from before May 2025 is read as the later bits"
  "citus_claims~the claims worker does not read the claims of the other Citus nodes"
  "claims_gather_apart~an error of one Citus node's question or write (its bound passed, an answer the table cannot take) fails the gathering of every node's"
  "claims_elsewhere~a Citus node whose claims database has no Citus says nothing of the comparison it does not make"
  "citus_layouts~the claims worker does not compare the layouts of the Citus nodes"
  "claims_planted~the claims gather sends its read to nodes where snowflake_claims is not pg_snowflake's"
  "claims_cluster_once~the claims gather takes a cluster's claims from any node that answers them"
  "claims_gather_timeout~the claims worker waits for a Citus node's answer without a bound"
  "claims_one_cluster~a Citus node's answer may hold the claims of many clusters"
  "claims_types~a Citus node's system identifier or worker id sent as a JSON string is taken for a number (0.5.0: 64 invented clusters an answer)"
  "claims_future~a Citus node's claim may be seen any time ahead of this node's clock (0.5.0: last_seen = infinity replaced a real claim for good)"
  "claims_rebind~a Citus node may speak for a new cluster at every gathering"
  "claims_per_node~one Citus node that does not answer loses the other nodes' answers of the gathering (0.5.0: one statement for all, cancelled whole)"
  "claims_retained~claims are never deleted (0.5.0: the table grew without end)"
  "clash_rate~every start of a clash is logged (0.5.0: 111,000 lines in 10 s)"
  "claims_sigterm~a SIGTERM only sets a flag in the claims worker, which a wait inside Citus does not see"
  "printable~a peer's text (a Citus node's answer or error) goes into a message with its line breaks"
  "registry_printable~the registry's error text goes into the member's log with its line breaks"
  "private_network~test processes run on the machine's own network (0.5.0: any local user was a test server's superuser)"
  "image_files~the extension image holds the package's documentation too, not only the extension's files~s/^install -d -m 755 \"\\\$root\/lib\"/cp -a \"\\\$work\/deb\/usr\/share\/doc\" \"\\\$root\/\"\ninstall -d -m 755 \"\\\$root\/lib\"/m"
  "image_links~the extension image takes a package's links and FIFOs: the files they lead to on the machine that builds it, a read that never ends~s/^\[ -z \"\\\$odd\" \] \|\|/true ||/m"
  "demo_socket_only~make run's demo trusts connections on 127.0.0.1 (0.5.0: any local user was its superuser)~s/--auth-local=trust --auth-host=reject/-A trust/~s/      echo \"listen_addresses = ''\"/      echo \"listen_addresses = '127.0.0.1'\"/"
  "demo_socket_dir~make run's socket is open to every local user (its directory and the socket itself)~s/  as_pg chmod 0700 \"\\\$SOCKETS\"\n//~s/      echo \"unix_socket_permissions = 0700\"\n//"
  "no_follow~the harness, as root, follows the links postgres plants in a cluster's directory (0.5.0: a root file of mode 600 linked as TRAP was emptied)"
  "citus_unchecked~a Citus node makes ids with a worker id set by hand that nothing compares with the other nodes'"
  "adopt_every_node~snowflake_adopt() on a Citus table moves the generator of its own node alone"
  "adopt_planted~snowflake_adopt() on a Citus table calls whatever function a node finds by the name"
  "adopt_distribution_column~snowflake_adopt() on a Citus distribution column is left to Citus (XX000)"
  "citus_sha256~scripts/build-citus.sh builds an archive whatever its sha256~s/\nif \[ \x22\\\$got\x22 != \x22\\\$SHA256\x22 \]; then/\nif false; then/"
  "fetch_fallback~a release gone from the archive ends the build (no fallback to the next listed one)~s/  say \x22PostgreSQL \\\$v cannot be had[^\n]*\n/  break\n/"
  "registry_copy~a COPY answer is read as any other result, and results are asked for until libpq has no more (0.4.0: the worker spun at 100% CPU, past a fast stop)"
  "registry_single_row~the registry's answer is read whole, as libpq gathers it, not a row at a time"
  "registry_rows~an answer of more rows than a lease is read (the member takes the first)"
  "registry_columns~an answer of more or other columns than a lease is read"
  "registry_value_bytes~the registry's values are read whatever their size"
  "registry_memory~libpq's memory in the registry's worker is not bounded"
  "registry_start_above~a grant to start at or past the end of the lease asked for is taken, and cached"
  "registry_worker_range~a worker id outside the layout is taken from the registry"
  "registry_redact~passwords are shown as written in the registry's problems"
  "registry_answer_problem~an answer no registry gives is reported as an unreachable registry"
)

# What mutations change, restored from git after each (scripts/: the scripts they change, never
# this one, which bash is still reading).
MUTABLE=(sql scripts/build-postgres.sh scripts/build-citus.sh scripts/own-dir.sh scripts/repo.sh
         scripts/run.sh scripts/image.sh scripts/test-suites.py)
# Where mutation points are: the extension, its core and the harness the suites share.
CODE=(src core/src tests/common)
# The names of the mutation points in the code, one a line (a point may be written in several
# places: one guard, several lines of code).
points() {
  find "${CODE[@]}" -name '*.rs' ! -path core/src/mutant.rs -print0 \
    | xargs -0 perl -0777 -ne 's{^\s*//[^\n]*}{}mg;
                               print "$1\n" while /mutant!\(\s*([a-z0-9_]+),/g;
                               # mutant_text!'"'"'s `name: "from" => "to"`
                               print "$1\n" while /^\s+([a-z0-9_]+): "(?:[^"\\]|\\.)*"\s*=>\s*"/mg'
}
# The files that hold the marker of row $1.
marked() { grep -rlE "mutant: $1([^A-Za-z0-9_]|\$)" "${MUTABLE[@]}" || true; }
count_matches() { perl -0777 -ne "\$n = ${2}g; print \$n + 0" "$1"; }
# The one marked file where substitution $2 of row $1 matches, once; else says why and fails.
# A refactor that rewrites the code a row mutates orphans the row (0 matches), and the full run
# would stop there: --check finds it first.
target() {
  local file count found=() total=0
  for file in $(marked "$1"); do
    count=$(count_matches "$file" "$2")
    [ "$count" = 0 ] || found+=("$file")
    total=$((total + count))
  done
  if [ "$total" = 1 ]; then echo "${found[0]}"; return 0; fi
  echo "mutation $1 matches $total times in the files marked for it ($(marked "$1" | paste -sd' ' -))" >&2
  return 1
}
if [ "${1:-}" = --check ]; then
  bad=0
  in_code=$(points | sort -u)
  text_rows=0
  for m in "${MUTATIONS[@]}"; do
    IFS='~' read -r -a fields <<< "$m"
    if [ ${#fields[@]} = 2 ]; then
      grep -qx "${fields[0]}" <<< "$in_code" \
        || { echo "mutation ${fields[0]} has no mutant!(${fields[0]}, ...) in ${CODE[*]}" >&2; bad=1; }
      continue
    fi
    text_rows=$((text_rows + 1))
    for ((i = 2; i < ${#fields[@]}; i++)); do
      target "${fields[0]}" "${fields[i]}" >/dev/null || bad=1
    done
  done
  # Every mutation point names a row.
  while IFS= read -r orphan; do
    [ -z "$orphan" ] || { echo "a mutation point names no row: mutant!($orphan, ...)" >&2; bad=1; }
  done < <(comm -13 <(printf '%s\n' "${MUTATIONS[@]}" | cut -d'~' -f1 | sort) <(echo "$in_code"))
  # Every marker names a row.
  names=$(printf '%s\n' "${MUTATIONS[@]}" | cut -d'~' -f1 | sort)
  while IFS= read -r orphan; do
    [ -z "$orphan" ] || { echo "a marker names no row: mutant: $orphan" >&2; bad=1; }
  done < <(comm -13 <(echo "$names") <(grep -rhoE "mutant: [a-z0-9_]+" "${MUTABLE[@]}" | cut -d' ' -f2 | sort -u))
  [ $bad = 0 ] && echo "mutations: each of the ${#MUTATIONS[@]} rows has its place: $((${#MUTATIONS[@]} - text_rows)) mutation points in the code, $text_rows text substitutions"
  # docs/testing.md's table (the one whose header starts `| mutation | removes |`) names each
  # row once, with the same "removes" text, and no row the script lacks.
  doc=docs/testing.md
  tables=$(grep -c '^| mutation | removes |' "$doc" || true)
  [ "$tables" = 1 ] || { echo "$doc: $tables tables of mutations, not one" >&2; bad=1; }
  documented=$(awk -F' [|] ' '/^[|] mutation [|] removes [|]/ { on = 1; next }
                              on && !/^[|]/ { exit }
                              on && !/^[|]---/ { sub(/^[|] /, "", $1); print $1 "\t" $2 }' "$doc")
  rows=$("$0" --list)
  while IFS= read -r missing; do
    [ -z "$missing" ] || { echo "$doc lacks the row ${missing%%$'\t'*} | ${missing#*$'\t'} |" >&2; bad=1; }
  done < <(comm -23 <(sort <<< "$rows") <(sort -u <<< "$documented"))
  while IFS= read -r extra; do
    [ -z "$extra" ] || { echo "$doc has a row the script lacks (or with another text): ${extra%%$'\t'*} | ${extra#*$'\t'} |" >&2; bad=1; }
  done < <(comm -13 <(sort <<< "$rows") <(sort -u <<< "$documented"))
  twice=$(cut -f1 <<< "$documented" | sort | uniq -d | paste -sd' ' -)
  [ -z "$twice" ] || { echo "$doc names these rows twice: $twice" >&2; bad=1; }
  [ $bad = 0 ] && echo "mutations: $doc lists each row once, as the script describes it"
  exit $bad
fi
if [ "${1:-}" = --list ]; then
  for m in "${MUTATIONS[@]}"; do
    IFS='~' read -r -a fields <<< "$m"
    printf '%s\t%s\n' "${fields[0]}" "${fields[1]}"
  done
  exit 0
fi

[ -z "$(git status --porcelain "${MUTABLE[@]}")" ] || { echo "${MUTABLE[*]} have uncommitted changes" >&2; exit 2; }

PG=${PG:-15}
# Each row's build names its own; the reinstall at the end must name none.
unset PG_SNOWFLAKE_MUTANT
export PG_CONFIG=${PG_CONFIG:-$(scripts/pg-config.sh "$PG")}
# Suites that can tell: the soak (60 s) and the JavaScript decoder test nothing these
# mutations touch; the README shows a time-range plan. pg_upgrade needs two majors: with PG=18
# the upgrade suite runs from 17 (make test-upgrade's pair, 17's ordinary build as installed),
# elsewhere not at all (without PG_UPGRADE_FROM_CONFIG each of its tests fails at once, which
# would read as caught).
if [ "$PG" = 18 ]; then export PG_UPGRADE_FROM_CONFIG=${PG_UPGRADE_FROM_CONFIG:-$(scripts/pg-config.sh 17)}; fi
SUITES=(--test restart --test crash --test clock --test standby --test sync_standby
        --test configuration --test concurrency --test burst --test pacing --test toolkit
        --test extension_upgrade --test layouts --test layout_changes --test readme --test multinode --test hostile
        --test time_ranges --test power_loss --test patroni --test registry
        --test registry_shutdown --test hostile_races --test setup_scripts --test stalled_disk
        --test lost_state_file --test hostile_registry --test citus)
# pg_auto_failover is packaged for 15 only.
[ "$PG" != 15 ] || SUITES+=(--test auto_failover)
[ -z "${PG_UPGRADE_FROM_CONFIG:-}" ] || SUITES+=(--test upgrade)
# MUTATION_SUITES="power_loss crash" runs only those, to check a new row quickly.
# MUTATION_SUITES=known runs, for each row, the tests docs/testing.md lists as failing for it
# (the whole suite where it names one): far fewer tests a row, to see every row still caught (it
# cannot find another test that would now fail too).
if [ -n "${MUTATION_SUITES:-}" ] && [ "$MUTATION_SUITES" != known ]; then
  SUITES=(); for s in $MUTATION_SUITES; do SUITES+=(--test "$s"); done
fi
# The tests (or whole suites) that docs/testing.md's third column names for row $1.
known_tests() {
  awk -F' [|] ' -v row="$1" '/^[|] mutation [|] removes [|]/ { on = 1; next }
                             on && !/^[|]/ { exit }
                             on { sub(/^[|] /, "", $1); if ($1 == row) { sub(/ [|]$/, "", $3); print $3 } }' \
      docs/testing.md | tr ',' '\n' | sed -E 's/^ +//; s/[ (].*//' | grep -v '^$' || true
}
# The black-box suites (test files) of those tests.
known_suites() {
  known_tests "$1" | while read -r t; do
    if ls tests/*/"$t.rs" >/dev/null 2>&1; then ls tests/*/"$t.rs"; else grep -lE "fn $t\(" tests/*/*.rs || true; fi
  done | xargs -r -n1 basename | sed 's/\.rs$//' | sort -u
}
# Those of them that are #[pg_test]s (pgrx-tests/): `cargo pgrx test` builds the mutated source
# with the test schema and runs each in a server it starts.
known_pg_tests() {
  known_tests "$1" | while read -r t; do
    if grep -qE "fn $t\(" pgrx-tests/*.rs; then echo "$t"; fi
  done
}
PGRX_TEST_DIR=/tmp/pg_snowflake-pgrx


only=" $* "
rows=()
# A run that ends early leaves its last build installed, a guard removed: the trap says so (a
# mutation point's build also says so in the log of every server that preloads it; a text row's
# build has nothing else that marks it).
installed=
trap 'git checkout -q -- "${MUTABLE[@]}"
      [ -z "$installed" ] || echo "$0: the pg_snowflake installed in $PG_CONFIG is the build of $installed, a guard removed: make install PG=$PG replaces it" >&2' EXIT
for m in "${MUTATIONS[@]}"; do
  IFS='~' read -r -a fields <<< "$m"
  name=${fields[0]}; what=${fields[1]}
  [ "$only" = "  " ] || [[ "$only" == *" $name "* ]] || continue
  row_suites=("${SUITES[@]}")
  row_pg_tests=()
  row_filters=()
  if [ "${MUTATION_SUITES:-}" = known ]; then
    row_suites=()
    for s in $(known_suites "$name"); do
      [ "$s" != upgrade ] || [ -n "${PG_UPGRADE_FROM_CONFIG:-}" ] || continue
      row_suites+=(--test "$s")
    done
    for t in $(known_pg_tests "$name"); do row_pg_tests+=("$t"); done
    # Only the tests the table names, unless it names a whole suite: the whole Citus suite took
    # 2 to 2.5 min a row.
    mapfile -t row_filters < <(known_tests "$name")
    for t in "${row_filters[@]}"; do
      if ls tests/*/"$t.rs" >/dev/null 2>&1; then row_filters=(); break; fi
    done
    [ $((${#row_suites[@]} + ${#row_pg_tests[@]})) -gt 0 ] || {
      rows+=("| $name | $what | not run: docs/testing.md names no test for it |")
      echo "${rows[-1]}" >&2; continue; }
  fi
  git checkout -q -- "${MUTABLE[@]}"
  # A mutation point is chosen by the build's environment; the harness's own (tests/common) by
  # the tests' build too.
  build_env=(PG_SNOWFLAKE_MUTANT=); test_env=(PG_SNOWFLAKE_MUTANT=)
  if [ ${#fields[@]} = 2 ]; then
    build_env=(PG_SNOWFLAKE_MUTANT="$name")
    ! grep -rqE "mutant!\(\s*$name,|^\s+$name: \"" tests/common || test_env=(PG_SNOWFLAKE_MUTANT="$name")
  fi
  for ((i = 2; i < ${#fields[@]}; i++)); do
    subst=${fields[i]}
    file=$(target "$name" "$subst") || exit 1
    perl -0777 -pi -e "$subst" "$file"
  done
  echo "==> $name: $what (${row_suites[*]} ${row_pg_tests[*]})" >&2
  installed=$name
  { env "${build_env[@]}" cargo pgrx install --profile mutation --pg-config "$PG_CONFIG" && scripts/install-sql.sh "$PG_CONFIG"; } >/dev/null 2>&1 \
    || { rows+=("| $name | $what | does not build |"); echo "${rows[-1]}" >&2; continue; }
  log=target/mutations/$name.log
  mkdir -p target/mutations
  # A mutation can make a test hang (a wait that nothing ends): 10 minutes at most.
  : >"$log"
  if [ ${#row_suites[@]} -gt 0 ]; then
    timeout 600 env "${test_env[@]}" cargo test "${row_suites[@]}" --no-fail-fast -- --test-threads=2 "${row_filters[@]}" >>"$log" 2>&1 || true
  fi
  for t in "${row_pg_tests[@]}"; do
    rm -rf "${PGRX_TEST_DIR:?}/$PG" && scripts/own-dir.sh "$PGRX_TEST_DIR" && scripts/own-dir.sh "$PGRX_TEST_DIR/$PG"
    timeout 600 env "${build_env[@]}" cargo pgrx test "pg$PG" "$t" --runas postgres --pgdata "$PGRX_TEST_DIR/$PG/data" >>"$log" 2>&1 || true
  done
  failed=$( { grep -E '^test .* FAILED$' "$log" | sed -E 's/^test (.*) \.\.\. FAILED$/\1/; s/^pg_tests::.*::pg_//'
              grep -oE "deps/[a-z_]+-[0-9a-f]+ --test-threads=2[^\`]*\` \(signal" "$log" \
                | sed -E 's/^deps\/([a-z_]+)-.*/\1 (killed, did not finish)/'; } \
            | sort | paste -sd, - | sed 's/,/, /g' || true)
  rows+=("| $name | $what | ${failed:-none} |")
  # A full run takes hours: each row also goes to stderr as it ends, so a stopped run keeps them.
  echo "${rows[-1]}" >&2
done
git checkout -q -- "${MUTABLE[@]}"
echo "| mutation | removes | tests that fail (PostgreSQL $PG) |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "Reinstalling the unmutated release build" >&2
cargo pgrx install --release --pg-config "$PG_CONFIG" >/dev/null 2>&1
scripts/install-sql.sh "$PG_CONFIG" >/dev/null
installed=
