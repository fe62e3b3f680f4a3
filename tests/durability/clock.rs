//! The clock steps back under a running server (libfaketime moves it): ids never repeat and
//! never go back, each step is logged as a WARNING and counted, and past snowflake.max_drift
//! calls fail with a clear error instead of handing out a wrong id.
#![cfg(not(feature = "pg_test"))]

use common::*;
use std::time::{Duration, Instant};
use testkit as common;

/// A server whose clock the test moves, with 1 s of drift allowed and calls beyond it waiting
/// `drift_wait` (a setting's value) for the clock.
fn max_drift_1s(name: &str, drift_wait: &str) -> (Cluster, FakeClock) {
    let wait = format!("snowflake.drift_wait = {drift_wait}");
    Cluster::start_with_fake_clock(name, &["snowflake.max_drift = '1s'", &wait])
}

fn batch(c: &mut Client) -> Vec<i64> {
    ids(c, "SELECT snowflake_next() FROM generate_series(1, 2000)")
}

/// The size of the first step the server reported.
fn stepped_back_ms(log: &str) -> u64 {
    let at = log.find("the system clock stepped back by ").expect("no step reported");
    let rest = &log[at + "the system clock stepped back by ".len()..];
    rest.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_five_second_step_back_is_absorbed_and_reported() {
    let (cluster, clock) = Cluster::start_with_fake_clock("step_5s", &[]);
    let mut c = cluster.connect_ext();
    // The server reports the step as its highest clock reading before it minus its first
    // reading after: 5 s less the real time between those two readings, which lies inside
    // `window` (from before the last batch on the old clock to after the first on the new one).
    let window_start = Instant::now();
    let mut all = batch(&mut c);
    clock.set(-5.0);
    all.extend(batch(&mut c));
    let window = window_start.elapsed().as_millis() as u64;
    for _ in 0..4 {
        all.extend(batch(&mut c));
    }
    assert_strictly_increasing(&all, "across a 5 s step back");
    let log = cluster.log();
    let step_ms = stepped_back_ms(&log);
    // 10 ms: the generator's tolerance for readings of different CPUs (STEP_TOLERANCE_MS).
    // Saturating: a window of 5 s or more (a stalled machine) fails this assertion, with the
    // figures, instead of an overflow panic.
    assert!(
        (5_000u64.saturating_sub(window + 10)..=5_010).contains(&step_ms),
        "reported {step_ms} ms, the readings were at most {window} ms apart:\n{log}"
    );
    assert!(log.contains("Backward step number 1 since the server started"), "{log}");
    assert_eq!(
        log.matches("the system clock stepped back").count(),
        1,
        "reported more than once:\n{log}"
    );
    // A second step is counted as the second.
    clock.set(-10.0);
    all.extend(batch(&mut c));
    assert_strictly_increasing(&all, "across a second step back");
    cluster.assert_logged("Backward step number 2 since the server started", "the second step");
}

#[test]
fn a_one_hour_step_back_fails_clearly_and_ids_resume_above_the_old_ones() {
    let (cluster, clock) =
        Cluster::start_with_fake_clock("step_1h", &["snowflake.drift_wait = '50ms'"]);
    let mut c = cluster.connect_ext();
    let before = batch(&mut c);
    clock.set(-3600.0);
    for _ in 0..3 {
        let ServerError { code: state, message, hint, .. } =
            expect_error(&mut c, "SELECT snowflake_next()");
        assert_eq!(state, "55000");
        assert_eq!(message, "the system clock is too far behind the last snowflake id");
        assert!(hint.contains("snowflake.max_drift"), "{hint}");
    }
    clock.set(0.0);
    let after = batch(&mut c);
    assert!(after[0] > *before.last().unwrap());
    assert_strictly_increasing(&after, "after the clock came back");
}

/// The time inside an id, as the server decodes it, in Unix milliseconds.
fn decoded_unix_ms(c: &mut Client, id: i64) -> f64 {
    c.query_one("SELECT extract(epoch FROM (snowflake_decode($1)).ts)::float8 * 1000", &[&id])
        .unwrap()
        .get(0)
}

#[test]
fn a_raised_max_drift_lets_ids_continue_through_a_one_hour_step() {
    let (cluster, clock) =
        Cluster::start_with_fake_clock("step_1h_allowed", &["snowflake.max_drift = '2h'"]);
    let mut c = cluster.connect_ext();
    let mut all = batch(&mut c);
    let before_ms = decoded_unix_ms(&mut c, *all.last().unwrap());
    clock.set(-3600.0);
    for _ in 0..3 {
        all.extend(batch(&mut c));
    }
    assert_strictly_increasing(&all, "through a 1 h step back");
    // The ids kept the time of the last id (plus what they borrowed), not the clock's.
    let after_ms = decoded_unix_ms(&mut c, *all.last().unwrap());
    assert!(after_ms >= before_ms && after_ms - before_ms < 60_000.0, "{before_ms} -> {after_ms}");
}

/// A call that waits for the clock shows pg_snowflake's wait event, which each major registers
/// its own way (src/postgres/wait_event.rs): `SnowflakeClock` from 17 on, `Extension` on 15 and 16. The
/// clock steps back 30 s past a `max_drift` of 1 s, so the next call would wait about 29 s: a
/// watcher looks at its session until it has seen the event (or 20 s have passed), then the
/// clock goes back to the real time and the call ends. How long the call waits is up to the
/// test, not to how fast the machine is.
#[test]
fn a_call_waiting_for_the_clock_shows_its_wait_event() {
    let (cluster, clock) = max_drift_1s("clock_event", "'40s'");
    let mut c = cluster.connect_ext();
    let pid: i32 = c.scalar("SELECT pg_backend_pid()");
    let mut watcher = cluster.connect();
    let event = format!("Extension/{}", wait_event_of("SnowflakeClock"));
    let mut all = batch(&mut c);
    clock.set(-30.0);
    let seen: std::collections::BTreeSet<String> = std::thread::scope(|s| {
        let caller = s.spawn(move || next_id(&mut c));
        let mut seen = std::collections::BTreeSet::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !seen.contains(&event) && !caller.is_finished() && Instant::now() < deadline {
            for row in watcher
                .query(
                    "SELECT wait_event_type, wait_event FROM pg_stat_activity WHERE pid = $1",
                    &[&pid],
                )
                .unwrap()
            {
                if let (Some(kind), Some(name)) =
                    (row.get::<_, Option<String>>(0), row.get::<_, Option<String>>(1))
                {
                    seen.insert(format!("{kind}/{name}"));
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // The real time again: the waiting call ends (within a second), whatever was seen.
        clock.set(0.0);
        all.push(caller.join().unwrap());
        seen
    });
    assert_strictly_increasing(&all, "after waiting for the clock");
    assert!(
        seen.contains(&event),
        "the waiting call never showed wait event {event}; it showed {seen:?}"
    );
}

#[test]
fn drift_wait_zero_fails_at_once_and_drift_wait_lets_a_short_step_pass() {
    // max_drift 1 s: a 1.2 s step needs about 200 ms of waiting.
    let (cluster, clock) = max_drift_1s("drift_wait", "0");
    let mut c = cluster.connect_ext();
    let mut all = batch(&mut c);
    clock.set(-1.2);
    let ServerError { code: state, .. } = expect_error(&mut c, "SELECT snowflake_next()");
    assert_eq!(state, "55000");
    cluster.append_conf(&["snowflake.drift_wait = '2s'"]);
    cluster.reload();
    // New sessions start with what the postmaster read at the reload.
    poll(Duration::from_secs(30), Duration::from_millis(20), || {
        let wait: String = cluster.connect().scalar("SHOW snowflake.drift_wait");
        (wait == "2s").then_some(()).ok_or(format!("drift_wait is still {wait}"))
    });
    let mut c = cluster.connect();
    all.extend(batch(&mut c));
    assert_strictly_increasing(&all, "after waiting for the clock");
}

#[test]
fn a_clock_behind_at_start_up_never_gives_smaller_ids() {
    let (cluster, clock) =
        Cluster::start_with_fake_clock("behind_at_start", &["snowflake.max_drift = '5min'"]);
    let before = batch(&mut cluster.connect_ext());
    cluster.stop("fast");
    clock.set(-60.0);
    cluster.start();
    let mut c = cluster.connect();
    let after = batch(&mut c);
    assert!(
        after[0] > *before.last().unwrap(),
        "{} is not above {}",
        after[0],
        before.last().unwrap()
    );
    assert_strictly_increasing(&after, "after a start 60 s behind");
    let log = cluster.log();
    assert!(log.contains("ms behind the ids handed out before the restart"), "{log}");
}

#[test]
fn a_clock_behind_at_start_up_with_the_default_bound_fails_instead() {
    let (cluster, clock) = Cluster::start_with_fake_clock("behind_at_start_default", &[]);
    let before = batch(&mut cluster.connect_ext());
    cluster.stop("immediate");
    clock.set(-60.0);
    cluster.start();
    let mut c = cluster.connect();
    expect_error_is(
        &mut c,
        "SELECT snowflake_next()",
        "55000: the system clock is too far behind the last snowflake id",
    );
    clock.set(0.0);
    let after = batch(&mut c);
    assert!(after[0] > *before.last().unwrap());
}
