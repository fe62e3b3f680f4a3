//! Many sessions at once against one cluster: ids never repeat and never go back.
#![cfg(not(feature = "pg_test"))]

use common::*;
use std::collections::HashSet;
use std::time::Duration;
use testkit as common;

#[test]
fn eight_connections_in_parallel_never_share_an_id() {
    let cluster = Cluster::start_new("parallel_connections", &[]);
    cluster.connect_ext();
    const CONNECTIONS: usize = 8;
    const BATCHES: usize = 10;
    const PER_BATCH: usize = 2_500;
    let per_connection: Vec<Vec<i64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CONNECTIONS)
            .map(|_| {
                s.spawn(|| {
                    let mut client = cluster.connect();
                    let mut mine = Vec::new();
                    for _ in 0..BATCHES {
                        mine.extend(ids(
                            &mut client,
                            &format!(
                                "SELECT snowflake_next() FROM generate_series(1, {PER_BATCH})"
                            ),
                        ));
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all = HashSet::new();
    for (i, mine) in per_connection.iter().enumerate() {
        assert_eq!(mine.len(), BATCHES * PER_BATCH);
        assert_strictly_increasing(mine, &format!("connection {i}"));
        all.extend(mine.iter().copied());
    }
    assert_eq!(all.len(), CONNECTIONS * BATCHES * PER_BATCH, "some ids were handed out twice");
}

#[test]
fn two_hundred_thousand_rows_through_the_column_default() {
    let cluster = Cluster::start_new("bulk_default", &[]);
    let mut c = cluster.connect_ext();
    c.batch_execute(
        "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), n int NOT NULL);
         INSERT INTO t (n) SELECT g FROM generate_series(1, 200000) g",
    )
    .unwrap();
    let row = c
        .query_one(
            "SELECT count(*), count(DISTINCT id),
                    count(*) FILTER (WHERE id <= prev)
             FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev FROM t) s",
            &[],
        )
        .unwrap();
    let (rows, distinct, out_of_order): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!((rows, distinct, out_of_order), (200_000, 200_000, 0));
}

#[test]
fn pgbench_eight_clients_insert_through_the_default_without_a_duplicate_key() {
    let cluster = Cluster::start_new("pgbench_insert", &[]);
    let mut c = cluster.connect_ext();
    c.batch_execute("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), client int)")
        .unwrap();
    let script = cluster.dir.join("insert.sql");
    std::fs::write(&script, "INSERT INTO t (client) VALUES (:client_id);\n").unwrap();
    let out = check(
        cluster
            .client_cmd("pgbench")
            .args(["-n", "-c", "8", "-j", "2", "-t", "2500", "-M", "prepared", "-f"])
            .arg(&script)
            .output()
            .unwrap(),
        "pgbench",
    );
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("number of failed transactions: 0"), "{report}");
    let row = c.query_one("SELECT count(*), count(DISTINCT client) FROM t", &[]).unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (20_000, 8), "{report}");
}

/// A call that waits for its pacing slot shows pg_snowflake's wait event, which each major
/// registers its own way (src/postgres/wait_event.rs): `SnowflakePacing` from 17 on, `Extension` on 15
/// and 16 (where every wait of an extension is `Extension`, so there the test shows that paced
/// calls waited, by the stats, and that waits show as `Extension`). Three sessions burst on a
/// layout of one id per millisecond until a watcher has seen one of them wait; nothing is timed.
#[test]
fn a_paced_call_shows_its_wait_event() {
    let cluster = Cluster::start_new(
        "pacing_event",
        &[
            "snowflake.layout = custom",
            "snowflake.sequence_bits = 0",
            "snowflake.max_drift = '1s'",
            "snowflake.drift_wait = '5s'",
        ],
    );
    let mut watcher = cluster.connect_ext();
    let event = wait_event_of("SnowflakePacing");
    let stop = std::sync::atomic::AtomicBool::new(false);
    // The first error other than a turn that did not come within drift_wait (55000).
    let failed = std::sync::Mutex::new(None::<String>);
    std::thread::scope(|s| {
        // The bursts loop until `stop`: a failed poll must stop them (see StopOnDrop).
        let _stop = StopOnDrop(&stop);
        for _ in 0..3 {
            let (mut c, stop, failed) = (cluster.connect(), &stop, &failed);
            s.spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let sql = "SELECT snowflake_next() FROM generate_series(1, 100)";
                    if let Err(e) = c.query(sql, &[]) {
                        let state = e.code().map(|c| c.code().to_string()).unwrap_or_default();
                        if state != "55000" {
                            failed.lock().unwrap().get_or_insert(e.to_string());
                        }
                    }
                }
            });
        }
        // Until a session has shown the event and calls have been paced (on 15 and 16 a wait
        // for the renewal lock shows `Extension` too).
        let mut seen = false;
        poll(Duration::from_secs(30), Duration::from_millis(1), || {
            let waiting: i64 = watcher.scalar_with(
                "SELECT count(*) FROM pg_stat_activity
                  WHERE wait_event_type = 'Extension' AND wait_event = $1",
                &[&event],
            );
            seen |= waiting > 0;
            let paced = stats(&mut watcher)["clock"]["paced_ms"].as_u64().unwrap();
            (seen && paced > 0).then_some(()).ok_or(format!(
                "wait event {event} seen: {seen}; paced naps: {paced} (a burst failed: {:?})",
                failed.lock().unwrap()
            ))
        });
    });
}
