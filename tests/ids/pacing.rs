//! Pacing with fewer ids per time unit than the server has processes: one id per millisecond.
//!
//! Runs alone (scripts/test-suites.py): no single call may take 100 ms, and the bursts must
//! outrun one id per millisecond.
//!
//! Majors: 17. Pacing is the generator's own code (src/generator), the same on every major. On
//! 17, the server built with assertions.
#![cfg(not(feature = "pg_test"))]

use common::load::{Load, Looping};
use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use testkit as common;

/// One id per time unit (`sequence_bits = 0`: 1000 ids per second), fewer than the server has
/// processes: six sessions burst, four take one id every 20 ms and time each call. Pacing hands
/// out one slot per millisecond, first come, first served, so the bursts are held halfway to
/// `max_drift` and a single-row caller waits behind at most one slot of each waiting session
/// (about 10 ms): none ever meets the drift bound (no nap for the clock, no failure), and none
/// waits as long as the default `drift_wait` (100 ms), which bounds every wait of a call, its
/// turn included.
#[test]
fn one_id_per_time_unit_is_shared_fairly_between_bursts_and_single_calls() {
    let cluster = Cluster::start_new(
        "burst_one_per_unit",
        &["snowflake.layout = custom", "snowflake.sequence_bits = 0", "snowflake.max_drift = '1s'"],
    );
    cluster.connect_ext();
    let stop = AtomicBool::new(false);
    let (bursts, calls) = std::thread::scope(|s| {
        // The workers loop until `stop`: a panic here must stop them (see StopOnDrop).
        let _stop = StopOnDrop(&stop);
        let bursters = Looping::values(
            "burster",
            "SELECT count(snowflake_next()) FROM generate_series(1, 100)",
        )
        .run(s, cluster.sessions(6), &stop);
        let callers = Looping::calls("caller", "SELECT snowflake_next()")
            .pausing(Duration::from_millis(20))
            .run(s, cluster.sessions(4), &stop);
        std::thread::sleep(Duration::from_secs(6));
        stop.store(true, Ordering::Relaxed);
        (Load::joined(bursters), Load::joined(callers))
    });
    let (burst_ids, slowest_ms) = (bursts.made, calls.slowest_ms);
    let errors = [bursts.errors, calls.errors].concat();
    let calls = calls.made;
    let stats = stats(&mut cluster.connect());
    eprintln!(
        "one id per ms: {burst_ids} ids in bursts, {calls} single calls, the slowest {slowest_ms:.1} \
         ms, {} errors, {} ms of paced naps",
        errors.len(),
        stats["clock"]["paced_ms"]
    );
    assert!(errors.is_empty(), "{} calls failed, the first: {}", errors.len(), errors[0]);
    assert!(
        stats["clock"]["paced_ms"].as_u64().unwrap() > 0,
        "the bursts were never paced: the test did not exercise pacing"
    );
    assert_eq!(
        (stats["clock"]["waits_ms"].as_u64(), stats["clock"]["failures"].as_u64()),
        (Some(0), Some(0)),
        "the bursts drove the ids to max_drift: {stats}"
    );
    // The bursts took about what the clock added (1000 ids/s), not six times that.
    assert!(burst_ids < 6 * 1000 + 1000, "{burst_ids} ids in 6 s of bursts");
    assert!(calls > 500, "only {calls} single calls");
    assert!(slowest_ms < 100.0, "a single call took {slowest_ms:.1} ms");
}

/// Four sessions calling `SELECT snowflake_next()` in a loop until `stop`.
fn callers<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    cluster: &Cluster,
    stop: &'s AtomicBool,
) -> Vec<std::thread::ScopedJoinHandle<'s, Load>> {
    let clients = (0..4).map(|_| cluster.connect()).collect();
    Looping::calls("caller", "SELECT snowflake_next()").run(s, clients, stop)
}

/// A backward clock step while calls are paced: the ids are 8 s ahead of the clock (past half
/// of `max_drift`, 10 s), so every call takes a slot, and the slot counter follows the clock;
/// then the clock steps back 2 s more. In 0.4.0 the counter stayed 2 s ahead of the new clock
/// and every call waited out the step (four clients, 2,001 ms each, longer than `drift_wait`
/// allows). Now the counter is pulled back to the clock: no call waits longer than
/// `drift_wait` (500 ms here) plus scheduling slack, and none fails.
#[test]
fn a_clock_stepped_back_while_calls_are_paced_stalls_no_call() {
    let mut cluster = Cluster::init(
        "pacing_step_back",
        &["snowflake.max_drift = '10s'", "snowflake.drift_wait = '500ms'"],
    );
    let clock = cluster.use_fake_clock();
    cluster.start();
    let mut c = cluster.connect_ext();
    let stop = AtomicBool::new(false);
    let results: Vec<Load> = std::thread::scope(|s| {
        // The callers loop until `stop`: a panic here must stop them (see StopOnDrop).
        let _stop = StopOnDrop(&stop);
        let handles = callers(s, &cluster, &stop);
        poll(Duration::from_secs(10), Duration::from_millis(10), || {
            match stats(&mut c)["ids_since_start"].as_u64() {
                Some(n) if n > 1000 => Ok(()),
                n => Err(format!("{n:?} ids so far")),
            }
        });
        clock.set(-8.0);
        // Paced: the ids are more than half of max_drift ahead of the clock.
        poll(Duration::from_secs(10), Duration::from_millis(10), || {
            let ahead = stats(&mut c)["ahead_of_clock_ms"].as_i64().unwrap();
            (ahead > 5_000).then_some(()).ok_or(format!("the ids are {ahead} ms ahead"))
        });
        std::thread::sleep(Duration::from_secs(2));
        // 2 s of real time later the ids are 6 s ahead; 2 s back brings them to 8 s again, and
        // 2 s of calls after it end still past half of max_drift (6 s).
        clock.set(-10.0);
        std::thread::sleep(Duration::from_secs(2));
        let st = stats(&mut c);
        stop.store(true, Ordering::Relaxed);
        assert!(
            st["ahead_of_clock_ms"].as_i64().unwrap() > 5_000,
            "the calls were not paced after the second step: {st}"
        );
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let st = stats(&mut c);
    let slowest = results.iter().map(|r| r.slowest_ms).fold(0f64, f64::max);
    let made: i64 = results.iter().map(|r| r.made).sum();
    eprintln!(
        "after two backward steps: {made} ids, the slowest call {slowest:.1} ms, steps seen {}, \
         ids {} ms ahead of the clock",
        st["clock"]["steps_back"], st["ahead_of_clock_ms"]
    );
    for r in &results {
        assert!(r.errors.is_empty(), "a call failed: {}", r.errors[0]);
    }
    assert!(
        st["clock"]["steps_back"].as_u64().unwrap() >= 2,
        "the server saw fewer than two backward steps: {st}"
    );
    assert_within_drift_wait(slowest);
}

/// Sessions that cancel their paced calls (`statement_timeout = '1ms'` in a loop) beside
/// sessions that want ids, on a layout of one id per millisecond: the callers keep making ids,
/// and none waits longer than `drift_wait`. In 0.4.0 every cancelled call kept its slot, and the
/// counter ran ahead one slot per cancel: four such sessions left four callers 9 ids in 8 s, the
/// slowest call 15.9 s. The paced waits show a wait event in `pg_stat_activity`.
#[test]
fn sessions_that_abandon_their_paced_calls_hold_nobody_back() {
    let cluster = Cluster::start_new(
        "pacing_abandon",
        &[
            "snowflake.layout = custom",
            "snowflake.sequence_bits = 0",
            "snowflake.max_drift = '1s'",
            "snowflake.drift_wait = '500ms'",
        ],
    );
    let mut c = cluster.connect_ext();
    let stop = AtomicBool::new(false);
    let cancelled = std::sync::atomic::AtomicU64::new(0);
    let expected_event = wait_event_of("SnowflakePacing");
    let mut seen_waiting = 0;
    let results: Vec<Load> = std::thread::scope(|s| {
        // The workers loop until `stop`: a panic here must stop them (see StopOnDrop).
        let _stop = StopOnDrop(&stop);
        for _ in 0..4 {
            let (stop, cancelled) = (&stop, &cancelled);
            let mut a = cluster.connect();
            a.batch_execute("SET statement_timeout = '1ms'").unwrap();
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if a.query_one("SELECT snowflake_next()", &[]).is_err() {
                        cancelled.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        let handles = callers(s, &cluster, &stop);
        let until = Instant::now() + Duration::from_secs(8);
        while Instant::now() < until {
            let waiting: i64 = c.scalar_with(
                "SELECT count(*) FROM pg_stat_activity
                      WHERE wait_event_type = 'Extension' AND wait_event = $1
                        AND query = 'SELECT snowflake_next()'",
                &[&expected_event],
            );
            seen_waiting += waiting;
        }
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let st = stats(&mut c);
    let made: Vec<i64> = results.iter().map(|r| r.made).collect();
    let slowest = results.iter().map(|r| r.slowest_ms).fold(0f64, f64::max);
    eprintln!(
        "beside {} cancelled calls: the callers made {made:?} ids in 8 s, the slowest call \
         {slowest:.1} ms; {} ms of paced naps; {seen_waiting} sightings of a paced wait",
        cancelled.load(Ordering::Relaxed),
        st["clock"]["paced_ms"]
    );
    for r in &results {
        assert!(r.errors.is_empty(), "a call failed: {}", r.errors[0]);
    }
    assert!(
        cancelled.load(Ordering::Relaxed) > 1000,
        "the cancelling sessions were cancelled only {} times",
        cancelled.load(Ordering::Relaxed)
    );
    assert!(
        st["clock"]["paced_ms"].as_u64().unwrap() > 0,
        "nothing was paced: the test did not exercise pacing"
    );
    assert!(
        seen_waiting > 0,
        "no paced call showed wait event {expected_event} in pg_stat_activity"
    );
    // Eight sessions share 1000 ids a second: each caller gets about 1 in 8 ms.
    assert!(made.iter().all(|&n| n >= 200), "a caller made fewer than 200 ids in 8 s: {made:?}");
    assert_within_drift_wait(slowest);
}

/// `snowflake.drift_wait` bounds every wait of a call, its turn included: with it at 0, bursts
/// on a layout of one id per millisecond that run past half of `max_drift` fail at the first turn
/// they would wait for (55000, and what to do), instead of waiting for it. In 0.4.0 a turn was
/// waited for without bound (a clock step or abandoned turns made that seconds).
#[test]
fn a_paced_call_waits_no_longer_than_drift_wait() {
    let cluster = Cluster::start_new(
        "pacing_bound",
        &[
            "snowflake.layout = custom",
            "snowflake.sequence_bits = 0",
            "snowflake.max_drift = '1s'",
            "snowflake.drift_wait = 0",
        ],
    );
    cluster.connect_ext();
    let stop = AtomicBool::new(false);
    let errors: Vec<ServerError> = std::thread::scope(|s| {
        // The workers loop until `stop`: a panic here must stop them (see StopOnDrop).
        let _stop = StopOnDrop(&stop);
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let stop = &stop;
                let mut c = cluster.connect();
                s.spawn(move || {
                    let mut errors = vec![];
                    while !stop.load(Ordering::Relaxed) {
                        let burst = "SELECT count(snowflake_next()) FROM generate_series(1, 100)";
                        if let Err(e) = c.query_one(burst, &[]) {
                            errors.push(db_error(&e));
                        }
                    }
                    errors
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(4));
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let stats = stats(&mut cluster.connect());
    eprintln!("drift_wait 0: {} bursts failed at their turn; {stats}", errors.len());
    assert!(!errors.is_empty(), "no paced call failed with drift_wait = 0: a turn was waited for");
    for ServerError { code, message, hint, .. } in &errors {
        assert_eq!(
            (code.as_str(), message.as_str()),
            ("55000", "snowflake_next() waited too long for its turn")
        );
        assert!(hint.contains("more sequence bits"), "{hint}");
    }
    // A burst of 100 ids never waits: it fails at the first turn in a later millisecond, and
    // no 1 ms nap was taken. (Counted, not timed: a loaded machine stretches any burst.)
    assert_eq!(
        (stats["clock"]["paced_ms"].as_u64(), stats["clock"]["waits_ms"].as_u64()),
        (Some(0), Some(0)),
        "a call napped with drift_wait = 0"
    );
}

/// No call took longer than `drift_wait` (500 ms in these tests) and as much again for
/// scheduling.
#[track_caller]
fn assert_within_drift_wait(slowest_ms: f64) {
    assert!(
        slowest_ms < 500.0 + 500.0,
        "a call took {slowest_ms:.1} ms, longer than drift_wait (500 ms) and its slack"
    );
}
