//! kill -9 under concurrent load, of the whole server or of one backend: every id a client
//! received before the crash is below every id handed out after it, also when the clock comes
//! back behind.
#![cfg(not(feature = "pg_test"))]

use common::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use testkit as common;

/// Runs `clients` sessions that draw ids in batches until their server connection dies; after
/// `crash_after`, runs `crash`. Returns every id they received, in order per session.
fn draw_until_crash(
    cluster: &Cluster,
    clients: usize,
    crash_after: Duration,
    crash: impl FnOnce(),
) -> Vec<Vec<i64>> {
    let received = Mutex::new(vec![Vec::new(); clients]);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        // The workers loop until `stop`: a panic here must stop them (see StopOnDrop).
        let _stop = StopOnDrop(&stop);
        let mut handles = Vec::new();
        for i in 0..clients {
            let (received, stop) = (&received, &stop);
            handles.push(s.spawn(move || {
                let mut c = cluster.connect();
                while !stop.load(Ordering::Relaxed) {
                    match c.query("SELECT snowflake_next() FROM generate_series(1, 500)", &[]) {
                        Ok(rows) => received.lock().unwrap()[i]
                            .extend(rows.iter().map(|r| r.get::<_, i64>(0))),
                        Err(_) => break, // the server ended this session
                    }
                }
            }));
        }
        std::thread::sleep(crash_after);
        crash();
        stop.store(true, Ordering::Relaxed);
    });
    received.into_inner().unwrap()
}

/// Connects once the server accepts connections again (after a crash and its recovery).
fn reconnect(cluster: &Cluster) -> Client {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match Client::connect(&cluster.conninfo("postgres"), NoTls) {
            Ok(c) => return c,
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("the server did not come back: {e}\n{}", cluster.log()),
        }
    }
}

fn check_after_crash(before: &[Vec<i64>], after: &[i64]) {
    let all: Vec<i64> = before.iter().flatten().copied().collect();
    assert!(all.len() > 10_000, "only {} ids before the crash", all.len());
    for (i, mine) in before.iter().enumerate() {
        assert_strictly_increasing(mine, &format!("session {i} before the crash"));
    }
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len(), "duplicates before the crash");
    assert_above_all(&all, after, "the crash");
}

/// `clients` sessions draw ids for `crash_after`, then kill -9 of the postmaster; the server
/// starts again with its clock `behind_s` seconds back, and its ids are above every id before.
fn crash_then_start_behind(
    name: &str,
    conf: &[&str],
    clients: usize,
    crash_after: Duration,
    behind_s: f64,
) -> Cluster {
    let (cluster, clock) = Cluster::start_with_fake_clock(name, conf);
    cluster.connect_ext();
    let before = draw_until_crash(&cluster, clients, crash_after, || cluster.crash());
    clock.set(-behind_s);
    cluster.start();
    let after =
        ids(&mut cluster.connect(), "SELECT snowflake_next() FROM generate_series(1, 1000)");
    check_after_crash(&before, &after);
    cluster
}

#[test]
fn kill_9_under_concurrent_load_never_goes_back() {
    // The clock comes back 3 s behind, within the default snowflake.max_drift (10 s): without
    // the durable mark the generator would start from that clock, below the ids before.
    let cluster = crash_then_start_behind("crash_load", &[], 6, Duration::from_secs(3), 3.0);
    assert!(cluster.log().contains("database system was interrupted"), "no crash recovery ran");
}

#[test]
fn kill_9_of_one_backend_under_load_never_goes_back() {
    // The postmaster survives the kill of one backend: it ends every other backend, sets up
    // shared memory anew and runs crash recovery, and the generator must come back from the
    // durable mark. The CHECKPOINT leaves the older marks out of the WAL that recovery replays,
    // and the clock is moved 3 s back, within the default snowflake.max_drift. The CHECKPOINT
    // and the kill come right after a renewal and before the next (about a second apart under
    // this load), checked by the count of renewals: the newest mark is then in the state file
    // alone, not in WAL after the checkpoint.
    let (cluster, clock) = Cluster::start_with_fake_clock("backend_kill", &[]);
    let mut victim = cluster.connect_ext();
    let pid: i32 = victim.scalar("SELECT pg_backend_pid()");
    let before = draw_until_crash(&cluster, 6, Duration::from_secs(3), || {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let renewed = renewals(&mut victim);
            poll(Duration::from_secs(10), Duration::from_millis(1), || {
                (renewals(&mut victim) > renewed)
                    .then_some(())
                    .ok_or("no renewal under load".into())
            });
            let renewed = renewals(&mut victim);
            victim.batch_execute("CHECKPOINT").unwrap();
            clock.set(-3.0);
            if renewals(&mut victim) == renewed {
                break;
            }
            // A renewal came after the checkpoint: its mark would be replayed from WAL.
            clock.set(0.0);
            assert!(
                std::time::Instant::now() < deadline,
                "no checkpoint fell between two renewals within 60 s"
            );
        }
        cluster.kill_backend(pid);
    });
    let after =
        ids(&mut reconnect(&cluster), "SELECT snowflake_next() FROM generate_series(1, 1000)");
    check_after_crash(&before, &after);
    let log = cluster.log();
    assert!(log.contains("terminated by signal 9"), "the backend was not killed:\n{log}");
    assert!(
        log.contains("all server processes terminated; reinitializing"),
        "shared memory was not set up anew:\n{log}"
    );
}

#[test]
fn kill_9_then_a_start_with_the_clock_behind_never_goes_back() {
    // Ids before the crash run ahead of a clock that comes back 30 s behind: only the durable
    // mark keeps the new ids above them.
    let conf = ["snowflake.max_drift = '5min'"];
    crash_then_start_behind("crash_clock_behind", &conf, 4, Duration::from_secs(2), 30.0);
}

#[test]
fn immediate_and_fast_restarts_with_the_clock_behind_never_go_back() {
    let (cluster, clock) =
        Cluster::start_with_fake_clock("restart_clock_behind", &["snowflake.max_drift = '5min'"]);
    let mut all =
        ids(&mut cluster.connect_ext(), "SELECT snowflake_next() FROM generate_series(1, 20000)");
    for (mode, offset) in [("immediate", -20.0), ("fast", -40.0), ("immediate", -45.0)] {
        cluster.stop(mode);
        clock.set(offset);
        cluster.start();
        all.extend(ids(
            &mut cluster.connect(),
            "SELECT snowflake_next() FROM generate_series(1, 20000)",
        ));
        assert_strictly_increasing(&all, &format!("after a {mode} restart at {offset} s"));
    }
}
