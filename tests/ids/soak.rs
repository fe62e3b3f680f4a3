//! A soak: 8 writers insert through `DEFAULT snowflake_next()` for a minute (SOAK_SECONDS)
//! while the server is restarted, has its clock stepped back, is killed with -9 and restarted
//! again. Every id a writer received is unique and above the writer's previous ones, every
//! received id is in the table, and the only errors are lost connections.
//!
//! Majors: 17. Restarts, a clock step and a crash are each tested alone on every major
//! (tests/durability); what the soak adds is their combination under load in the generator's own
//! code, the same on every major. It runs on 17, the server built with assertions.
#![cfg(not(feature = "pg_test"))]

use common::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use testkit as common;

/// Errors a client sees when the server goes away under it.
fn is_connection_loss(e: &postgres::Error) -> bool {
    match e.as_db_error() {
        // admin_shutdown, crash_shutdown, cannot_connect_now, and the connection_exception class
        Some(db) => {
            matches!(db.code().code(), "57P01" | "57P02" | "57P03")
                || db.code().code().starts_with("08")
        }
        None => true, // I/O error or closed connection: no answer from the server at all
    }
}

#[test]
fn eight_writers_through_restarts_a_clock_step_and_a_crash() {
    let seconds: u64 =
        std::env::var("SOAK_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let mut cluster = Cluster::init("soak", &["max_connections = 40"]);
    let clock = cluster.use_fake_clock();
    cluster.start();
    cluster
        .connect_ext()
        .batch_execute(
            "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), writer int NOT NULL)",
        )
        .unwrap();

    const WRITERS: usize = 8;
    let received = Mutex::new(vec![Vec::<i64>::new(); WRITERS]);
    let unexpected = Mutex::new(Vec::<String>::new());
    let lost_connections = Mutex::new(0usize);
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let at = |fraction: f64| start + Duration::from_secs_f64(seconds as f64 * fraction);
    let sleep_until = |t: Instant| std::thread::sleep(t.saturating_duration_since(Instant::now()));

    std::thread::scope(|s| {
        // The workers loop until `stop`: a panic here must stop them (see StopOnDrop).
        let _stop = StopOnDrop(&stop);
        for w in 0..WRITERS {
            let (received, unexpected, lost, stop, cluster) =
                (&received, &unexpected, &lost_connections, &stop, &cluster);
            s.spawn(move || {
                let mut client: Option<Client> = None;
                while !stop.load(Ordering::Relaxed) {
                    let c = match client.as_mut() {
                        Some(c) => c,
                        None => match Client::connect(&cluster.conninfo("postgres"), NoTls) {
                            Ok(c) => client.insert(c),
                            Err(_) => {
                                std::thread::sleep(Duration::from_millis(50));
                                continue;
                            }
                        },
                    };
                    let writer = w as i32;
                    match c.query(
                        "INSERT INTO t (writer) SELECT $1 FROM generate_series(1, 20) RETURNING id",
                        &[&writer],
                    ) {
                        Ok(rows) => received.lock().unwrap()[w]
                            .extend(rows.iter().map(|r| r.get::<_, i64>(0))),
                        Err(e) if is_connection_loss(&e) => {
                            *lost.lock().unwrap() += 1;
                            client = None;
                        }
                        Err(e) => {
                            unexpected.lock().unwrap().push(format!("writer {w}: {e:?}"));
                            client = None;
                        }
                    }
                }
            });
        }
        sleep_until(at(0.2));
        cluster.restart("fast");
        sleep_until(at(0.4));
        clock.set(-3.0);
        sleep_until(at(0.55));
        cluster.crash();
        cluster.start();
        sleep_until(at(0.75));
        cluster.restart("immediate");
        clock.set(0.0);
        sleep_until(at(1.0));
        stop.store(true, Ordering::Relaxed);
    });

    let unexpected = unexpected.into_inner().unwrap();
    assert!(
        unexpected.is_empty(),
        "errors other than lost connections:\n{}",
        unexpected.join("\n")
    );
    let received = received.into_inner().unwrap();
    let total: usize = received.iter().map(Vec::len).sum();
    eprintln!(
        "soak: {seconds} s, {total} ids received by {WRITERS} writers, {} lost connections",
        lost_connections.into_inner().unwrap()
    );
    assert!(total > 20_000, "only {total} ids in {seconds} s");
    for (w, mine) in received.iter().enumerate() {
        assert!(!mine.is_empty(), "writer {w} received nothing");
        assert_strictly_increasing(mine, &format!("writer {w}"));
    }
    let all: HashSet<i64> = received.iter().flatten().copied().collect();
    assert_eq!(all.len(), total, "{} ids were received twice", total - all.len());

    let mut c = cluster.connect();
    let in_table: HashSet<i64> = ids(&mut c, "SELECT id FROM t").into_iter().collect();
    let missing = all.difference(&in_table).count();
    assert_eq!(missing, 0, "{missing} received ids are not in the table");
    let other_workers: i64 =
        c.scalar("SELECT count(*) FROM t WHERE (snowflake_decode(id)).worker_id <> 1");
    assert_eq!(other_workers, 0);
}
