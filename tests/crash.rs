//! kill -9 of the whole server under concurrent load: every id a client received before the
//! crash is below every id handed out after it, also when the clock comes back behind.
#![cfg(not(feature = "pg_test"))]

mod common;
use common::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Runs `clients` sessions that draw ids in batches until the server dies; returns every id
/// they received, in order per session.
fn draw_until_crash(cluster: &Cluster, clients: usize, crash_after: Duration) -> Vec<Vec<i64>> {
    let received = Mutex::new(vec![Vec::new(); clients]);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for i in 0..clients {
            let (received, stop) = (&received, &stop);
            s.spawn(move || {
                let mut c = cluster.connect();
                while !stop.load(Ordering::Relaxed) {
                    match c.query("SELECT snowflake_next() FROM generate_series(1, 500)", &[]) {
                        Ok(rows) => received.lock().unwrap()[i]
                            .extend(rows.iter().map(|r| r.get::<_, i64>(0))),
                        Err(_) => break, // the server died under us
                    }
                }
            });
        }
        std::thread::sleep(crash_after);
        cluster.crash();
        stop.store(true, Ordering::Relaxed);
    });
    received.into_inner().unwrap()
}

fn check_after_crash(before: &[Vec<i64>], after: &[i64]) {
    let all: Vec<i64> = before.iter().flatten().copied().collect();
    assert!(
        all.len() > 10_000,
        "only {} ids before the crash",
        all.len()
    );
    for (i, mine) in before.iter().enumerate() {
        assert_strictly_increasing(mine, &format!("session {i} before the crash"));
    }
    assert_eq!(
        all.iter().collect::<HashSet<_>>().len(),
        all.len(),
        "duplicates before the crash"
    );
    let highest = *all.iter().max().unwrap();
    assert!(
        after[0] > highest,
        "first id after the crash {} is not above {highest}",
        after[0]
    );
    assert_strictly_increasing(after, "after the crash");
}

#[test]
fn kill_9_under_concurrent_load_never_goes_back() {
    let cluster = Cluster::start_new("crash_load", &[]);
    cluster.connect_ext();
    let before = draw_until_crash(&cluster, 6, Duration::from_secs(3));
    cluster.start();
    let after = ids(
        &mut cluster.connect(),
        "SELECT snowflake_next() FROM generate_series(1, 1000)",
    );
    check_after_crash(&before, &after);
    assert!(
        cluster.log().contains("database system was interrupted"),
        "no crash recovery ran"
    );
}

#[test]
fn kill_9_then_a_start_with_the_clock_behind_never_goes_back() {
    // Ids before the crash run ahead of a clock that comes back 30 s behind: only the durable
    // mark keeps the new ids above them.
    let mut cluster = Cluster::init("crash_clock_behind", &["snowflake.max_drift = '5min'"]);
    let clock = cluster.use_fake_clock();
    cluster.start();
    cluster.connect_ext();
    let before = draw_until_crash(&cluster, 4, Duration::from_secs(2));
    clock.set("-30s");
    cluster.start();
    let after = ids(
        &mut cluster.connect(),
        "SELECT snowflake_next() FROM generate_series(1, 1000)",
    );
    check_after_crash(&before, &after);
}

#[test]
fn immediate_and_fast_restarts_with_the_clock_behind_never_go_back() {
    let mut cluster = Cluster::init("restart_clock_behind", &["snowflake.max_drift = '5min'"]);
    let clock = cluster.use_fake_clock();
    cluster.start();
    let mut all = ids(
        &mut cluster.connect_ext(),
        "SELECT snowflake_next() FROM generate_series(1, 20000)",
    );
    for (mode, offset) in [
        ("immediate", "-20s"),
        ("fast", "-40s"),
        ("immediate", "-45s"),
    ] {
        cluster.stop(mode);
        clock.set(offset);
        cluster.start();
        all.extend(ids(
            &mut cluster.connect(),
            "SELECT snowflake_next() FROM generate_series(1, 20000)",
        ));
        assert_strictly_increasing(&all, &format!("after a {mode} restart at {offset}"));
    }
}
