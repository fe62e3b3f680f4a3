//! Bursts: sessions that draw ids far faster than the layout holds per millisecond borrow time
//! from the clock, but while the clock moves forward normally they never use up
//! `snowflake.max_drift` for everyone else: no caller ever naps for the clock (the server counts
//! such naps), none fails, and the ids stop about halfway, where pacing holds them. (Since 0.5.0
//! `drift_wait` bounds a paced call's wait for its turn too, so it cannot be 0 here: a burst's
//! turns in later milliseconds would fail.)
//!
//! Twitter's widths with 9 sequence bits (512 ids per ms, 512 000 a second): two bursting
//! sessions outrun that on any machine (one makes several million ids a second), where Twitter's
//! 4.096 M ids/s needed the whole of a 2-core machine. `pacing.rs` holds the case of one id per
//! millisecond.
//!
//! Runs alone (scripts/test-suites.py): two sessions must outrun 512 000 ids a second to reach
//! the pacing point.
//!
//! Majors: 17. Pacing is the generator's own code (src/generator), the same on every major. On
//! 17, the server built with assertions.
#![cfg(not(feature = "pg_test"))]

use common::load::{Load, Looping};
use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use testkit as common;

#[test]
fn bursts_never_make_single_row_callers_fail() {
    let cluster = Cluster::start_new(
        "burst",
        &[
            "snowflake.layout = custom",
            "snowflake.time_bits = 41",
            "snowflake.worker_bits = 10",
            "snowflake.sequence_bits = 9",
            "snowflake.max_drift = '1s'",
        ],
    );
    cluster
        .connect_ext()
        .batch_execute("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), v int)")
        .unwrap();
    let errors = Mutex::new(Vec::<String>::new());
    let stop = AtomicBool::new(false);
    let mut deepest_ms = 0.0f64;
    let (bursts, inserts) = std::thread::scope(|s| {
        // The workers loop until `stop`: a panic here must stop them (see StopOnDrop).
        let _stop = StopOnDrop(&stop);
        // generate_series in the select list (ProjectSet) calls snowflake_next() once per row
        // at about 2.5x the rate of the FROM form.
        let bursters = Looping::values(
            "burster",
            "SELECT count(id) FROM (SELECT snowflake_next() AS id, generate_series(1, 200000)) s",
        )
        .run(s, cluster.sessions(2), &stop);
        // Callers that take an id now and then, as an application does.
        let inserters = Looping::calls("inserter", "INSERT INTO t (v) VALUES (1)")
            .pausing(Duration::from_millis(1))
            .run(s, cluster.sessions(8), &stop);
        // How far ahead of the clock a fresh id is, sampled while the bursts run.
        let mut probe = cluster.connect();
        let until = Instant::now() + Duration::from_secs(8);
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(200));
            // The probe is a caller too: its failures count, and must not stop the others.
            match probe.query_one(
                "SELECT extract(epoch FROM (snowflake_decode(snowflake_next())).ts
                                           - clock_timestamp())::float8 * 1000",
                &[],
            ) {
                Ok(row) => deepest_ms = deepest_ms.max(row.get::<_, f64>(0)),
                Err(e) => errors.lock().unwrap().push(format!("probe: {}", why(&e))),
            }
        }
        stop.store(true, Ordering::Relaxed);
        (Load::joined(bursters), Load::joined(inserters))
    });
    let errors = [errors.into_inner().unwrap(), bursts.errors, inserts.errors].concat();
    let (burst_ids, inserts) = (bursts.made, inserts.made);
    eprintln!(
        "burst: {burst_ids} ids in bursts, {inserts} single-row inserts, ids at most \
         {deepest_ms:.0} ms ahead of the clock, {} errors",
        errors.len()
    );
    assert!(errors.is_empty(), "{} calls failed, the first: {}", errors.len(), errors[0]);
    // The bursts did borrow deep enough to be paced (the server counts the naps of paced
    // backends), and were held below max_drift (1 s), where every caller would have failed.
    let stats = stats(&mut cluster.connect());
    assert!(
        stats["clock"]["paced_ms"].as_u64().unwrap() > 0,
        "the bursts never reached the pacing point ({deepest_ms:.0} ms ahead at most): the \
         test did not exercise it"
    );
    assert_eq!(stats["clock"]["failures"], 0, "{stats}");
    assert_eq!(stats["clock"]["waits_ms"], 0, "the ids reached max_drift: {stats}");
    assert!(deepest_ms < 1000.0, "ids ran {deepest_ms:.0} ms ahead");
    assert!(inserts > 1000, "only {inserts} inserts");
    assert!(burst_ids > 0);
}
