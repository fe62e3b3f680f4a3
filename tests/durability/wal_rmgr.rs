//! The custom WAL resource manager id: the marks go to WAL under the id the library was built
//! with (147, or `PG_SNOWFLAKE_RMGR_ID` at build time; this test reads the same variable, so
//! `make test-rmgr-id` runs it against a build with 200), pg_waldump finds them there, and a
//! standby replays them: promoted with its clock 30 s behind, it continues above the primary.
#![cfg(not(feature = "pg_test"))]

use common::*;
use testkit as common;

/// The id the installed library should have been built with.
fn built_id() -> u32 {
    match std::env::var("PG_SNOWFLAKE_RMGR_ID") {
        Ok(id) => id.parse().expect("PG_SNOWFLAKE_RMGR_ID is a number"),
        Err(_) => 147,
    }
}

fn lsn(c: &mut Client, function: &str) -> String {
    c.scalar(&format!("SELECT {function}()::text"))
}

#[test]
fn marks_are_written_under_the_built_id_and_a_standby_replays_them() {
    let id = built_id();
    let primary = Cluster::start_new("rmgr_primary", &["snowflake.max_drift = '5min'"]);
    let mut p = primary.connect_ext();
    let mut old = ids(&mut p, "SELECT snowflake_next() FROM generate_series(1, 10000)");
    let (standby, _clock) = primary.basebackup_with_clock("rmgr_standby", -30.0);
    standby.start();
    let mut s = standby.connect();
    // From here on: the base backup's checkpoint may have recycled the WAL before it.
    let start = lsn(&mut p, "pg_current_wal_insert_lsn");
    old.extend(ids_through_renewals(&mut p, 2));
    wait_for_replay(&mut p, &mut s);
    let end = lsn(&mut p, "pg_current_wal_flush_lsn");

    // pg_waldump cannot load the extension: it names the rmgr by its id and cannot describe
    // the records (src/durability/wal.rs, desc).
    let out = check(
        primary
            .server_cmd("pg_waldump", &primary.data())
            .args(["-p", "pg_wal", "-s", &start, "-e", &end])
            .output()
            .unwrap(),
        "pg_waldump",
    );
    let wal = String::from_utf8_lossy(&out.stdout);
    let name = format!("rmgr: custom{id:03} ");
    let marks = wal.lines().filter(|l| l.contains(&name)).count();
    assert!(
        marks >= 2,
        "{marks} records of {name:?} between {start} and {end} (two renewals):\n{wal}"
    );
    let others: Vec<&str> =
        wal.lines().filter(|l| l.contains("rmgr: custom") && !l.contains(&name)).collect();
    assert!(
        others.is_empty(),
        "records of another custom resource manager (a build with another id? set \
         PG_SNOWFLAKE_RMGR_ID to the id it was built with):\n{}",
        others.join("\n")
    );
    assert!(
        wal.contains(&format!("rmid: {id}")),
        "pg_waldump no longer prints rmid: {id} for the marks:\n{wal}"
    );

    primary.stop("immediate");
    drop(s);
    standby.promote();
    let new = ids(&mut standby.connect(), "SELECT snowflake_next() FROM generate_series(1, 1000)");
    assert_above_all(&old, &new, "the promotion (did the standby replay the marks?)");
    assert!(
        standby
            .log()
            .contains(&format!("registered custom resource manager \"pg_snowflake\" with ID {id}")),
        "the standby's log does not show the rmgr registered with ID {id}:\n{}",
        standby.log()
    );
}
