//! A state file lost after a clean shutdown: deleted (a restore that skipped it, a cleanup
//! script) or emptied (a disk error). A clean shutdown leaves no WAL to replay, so only the copy
//! of the mark (`pg_snowflake/mark`) can keep the ids of the next start above the ones made
//! before; without it, an emptied state file refuses ids until an operator says where they may
//! go on. The clock is 10 s back at each start (libfaketime, checked by `Cluster::start`), so
//! ids from the clock would lie below the old ones.
#![cfg(not(feature = "pg_test"))]

use common::*;
use std::path::Path;
use testkit as common;

/// The clock at the start after the loss.
const BACK_S: f64 = -10.0;
/// Ids continue above the recovered mark, 10 s ahead of the clock and a lease (1.5 s) more:
/// more than the default bound of 10 s, so the bound is raised, as after any clock step that
/// large.
const MAX_DRIFT: &str = "snowflake.max_drift = '30s'";
const IDS: &str = "SELECT snowflake_next() FROM generate_series(1, 20000)";

#[derive(Clone, Copy, Debug)]
enum Loss {
    Deleted,
    Emptied,
}

/// A cluster with a fake clock that made 20,000 ids and was shut down cleanly (stopped);
/// returns it with its clock and the last id it made.
fn shut_down_after_ids(name: &str) -> (Cluster, FakeClock, i64) {
    let mut cluster = Cluster::init(name, &[MAX_DRIFT]);
    let clock = cluster.use_fake_clock();
    cluster.start();
    let before = ids(&mut cluster.connect_ext(), IDS);
    assert_strictly_increasing(&before, "before the shutdown");
    cluster.stop("fast");
    (cluster, clock, *before.last().unwrap())
}

fn lose(data: &Path, loss: Loss) {
    let state = data.join("pg_snowflake.state");
    assert!(state.exists(), "no state file after a clean shutdown");
    match loss {
        Loss::Deleted => std::fs::remove_file(&state).unwrap(),
        Loss::Emptied => files::write(&state, b"").unwrap(),
    }
}

/// How many of `after` are not above `last`, in words, for a failure message.
fn below(after: &[i64], last: i64) -> String {
    let n = after.iter().filter(|&&id| id <= last).count();
    format!(
        "{n} of {} ids after the restart are not above {last}, the last id before the \
         shutdown (the lowest after: {})",
        after.len(),
        after.iter().min().unwrap()
    )
}

#[test]
fn a_deleted_or_emptied_state_file_goes_on_above_the_old_ids_from_its_copy() {
    for loss in [Loss::Deleted, Loss::Emptied] {
        let (cluster, clock, last) = shut_down_after_ids(&format!("lost_state_{loss:?}"));
        lose(&cluster.data(), loss);
        clock.set(BACK_S);
        cluster.start();
        let after = ids(&mut cluster.connect(), IDS);
        assert!(
            after.iter().all(|&id| id > last),
            "{loss:?}: {}\n{}",
            below(&after, last),
            cluster.log()
        );
        assert_strictly_increasing(&after, "after the restart");
        let how = match loss {
            Loss::Deleted => "missing",
            Loss::Emptied => "empty",
        };
        let log = cluster.log();
        assert!(
            log.contains(&format!(
                "WARNING:  the snowflake state file \"pg_snowflake.state\" is {how}: ids \
                 continue above the copy of its mark in \"pg_snowflake/mark\""
            )),
            "{loss:?}: the log does not say where the mark came from:\n{log}"
        );
        // The renewals since put the state file back: the next start reads it again.
        cluster.stop("fast");
        cluster.start();
        assert!(
            cluster
                .log()
                .contains("LOG:  snowflake ids continue above the mark in \"pg_snowflake.state\""),
            "{}",
            cluster.log()
        );
        let more = ids(&mut cluster.connect(), IDS);
        assert!(more[0] > *after.last().unwrap());
    }
}

#[test]
fn an_emptied_state_file_without_its_copy_refuses_ids_until_advance_past() {
    let (cluster, clock, last) = shut_down_after_ids("lost_state_and_copy");
    lose(&cluster.data(), Loss::Emptied);
    std::fs::remove_dir_all(cluster.data().join("pg_snowflake")).unwrap();
    clock.set(BACK_S);
    cluster.start();
    let log = cluster.log();
    assert!(
        log.contains(
            "WARNING:  the snowflake state file \"pg_snowflake.state\" is empty and its copy \
             \"pg_snowflake/mark\" is missing: ids are refused"
        ),
        "the log does not say why ids are refused:\n{log}"
    );
    let mut c = cluster.connect();
    for sql in ["SELECT snowflake_next()", IDS] {
        let ServerError { code: state, message, hint, .. } = expect_error(&mut c, sql);
        assert_eq!(
            (state.as_str(), message.as_str()),
            ("55000", "the ids this server handed out before its last start are not known"),
            "{sql}"
        );
        assert!(
            hint.contains("Restore pg_snowflake.state from a backup")
                && hint.contains("snowflake_advance_past("),
            "{hint}"
        );
    }
    // The second way on the hint names: an id known to be at least as high as every old one.
    c.batch_execute(&format!("SELECT snowflake_advance_past({last})")).unwrap();
    let after = ids(&mut c, IDS);
    assert!(after.iter().all(|&id| id > last), "{}", below(&after, last));
    assert_strictly_increasing(&after, "after snowflake_advance_past()");
    // The advance was made durable: the next start goes on above it, without a refusal.
    cluster.stop("fast");
    cluster.start();
    let more = ids(&mut cluster.connect(), IDS);
    assert!(more[0] > *after.last().unwrap());
}

#[test]
fn a_data_directory_that_never_made_an_id_starts_from_the_clock_and_says_so() {
    let cluster = Cluster::start_new("never_made_an_id", &[]);
    let log = cluster.log();
    assert!(
        log.contains(
            "LOG:  no snowflake state file and no copy of it: this data directory has handed \
             out no ids, and they start from the clock"
        ),
        "{log}"
    );
    let mut c = cluster.connect_ext();
    // The first id at once, from the clock.
    let behind_ms: f64 = c.scalar(
        "SELECT extract(epoch FROM clock_timestamp() - snowflake_timestamp(snowflake_next()))
                    ::float8 * 1000",
    );
    assert!((-5.0..2000.0).contains(&behind_ms), "{behind_ms} ms");
    assert!(cluster.data().join("pg_snowflake.state").exists());
    assert!(cluster.data().join("pg_snowflake/mark").exists());
}
