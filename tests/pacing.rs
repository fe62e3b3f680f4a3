//! Pacing with fewer ids per time unit than the server has processes: one id per millisecond.
//!
//! Runs alone (scripts/test-suites.py): no single call may take 100 ms, and the bursts must
//! outrun one id per millisecond.
#![cfg(not(feature = "pg_test"))]

mod common;
use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One id per time unit (`sequence_bits = 0`: 1000 ids per second), fewer than the server has
/// processes: six sessions burst, four take one id every 20 ms and time each call. Pacing hands
/// out one slot per millisecond, first come, first served, so the bursts are held halfway to
/// `max_drift` and a single-row caller waits behind at most one slot of each waiting session
/// (about 10 ms): none fails, none waits for the clock (a call that met the bound would), and
/// none waits as long as `drift_wait` (100 ms, the default), which a paced call's wait for its
/// slot shares with its waits for the clock since 1127a8a (with `drift_wait = 0`, as before,
/// every paced call would fail at its first nap).
#[test]
fn one_id_per_time_unit_is_shared_fairly_between_bursts_and_single_calls() {
    let cluster = Cluster::start_new(
        "burst_one_per_unit",
        &[
            "snowflake.layout = custom",
            "snowflake.sequence_bits = 0",
            "snowflake.max_drift = '1s'",
            "snowflake.drift_wait = '100ms'",
        ],
    );
    cluster.connect_ext();
    let errors = Mutex::new(Vec::<String>::new());
    let stop = AtomicBool::new(false);
    let (mut burst_ids, mut calls, mut slowest_ms) = (0i64, 0usize, 0f64);
    std::thread::scope(|s| {
        let bursters: Vec<_> = (0..6)
            .map(|_| {
                let (errors, stop) = (&errors, &stop);
                let mut c = cluster.connect();
                s.spawn(move || {
                    let mut n = 0i64;
                    while !stop.load(Ordering::Relaxed) {
                        match c.query_one(
                            "SELECT count(snowflake_next()) FROM generate_series(1, 100)",
                            &[],
                        ) {
                            Ok(row) => n += row.get::<_, i64>(0),
                            Err(e) => errors.lock().unwrap().push(format!("burster: {}", why(&e))),
                        }
                    }
                    n
                })
            })
            .collect();
        let callers: Vec<_> = (0..4)
            .map(|_| {
                let (errors, stop) = (&errors, &stop);
                let mut c = cluster.connect();
                s.spawn(move || {
                    let (mut n, mut slowest) = (0usize, 0f64);
                    while !stop.load(Ordering::Relaxed) {
                        let sent = Instant::now();
                        match c.query_one("SELECT snowflake_next()", &[]) {
                            Ok(_) => n += 1,
                            Err(e) => errors.lock().unwrap().push(format!("caller: {}", why(&e))),
                        }
                        slowest = f64::max(slowest, sent.elapsed().as_secs_f64() * 1000.0);
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    (n, slowest)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(6));
        stop.store(true, Ordering::Relaxed);
        burst_ids = bursters.into_iter().map(|h| h.join().unwrap()).sum();
        for h in callers {
            let (n, slowest) = h.join().unwrap();
            calls += n;
            slowest_ms = slowest_ms.max(slowest);
        }
    });
    let errors = errors.into_inner().unwrap();
    let stats = stats(&mut cluster.connect());
    eprintln!(
        "one id per ms: {burst_ids} ids in bursts, {calls} single calls, the slowest {slowest_ms:.1} \
         ms, {} errors, {} ms of paced naps",
        errors.len(),
        stats["clock"]["paced_ms"]
    );
    assert!(
        errors.is_empty(),
        "{} calls failed, the first: {}",
        errors.len(),
        errors[0]
    );
    assert!(
        stats["clock"]["paced_ms"].as_u64().unwrap() > 0,
        "the bursts were never paced: the test did not exercise pacing"
    );
    assert_eq!(
        stats["clock"]["waits_ms"], 0,
        "a call met the bound: {stats}"
    );
    // The bursts took about what the clock added (1000 ids/s), not six times that.
    assert!(
        burst_ids < 6 * 1000 + 1000,
        "{burst_ids} ids in 6 s of bursts"
    );
    assert!(calls > 500, "only {calls} single calls");
    assert!(slowest_ms < 100.0, "a single call took {slowest_ms:.1} ms");
}
