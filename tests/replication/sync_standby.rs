//! Synchronous replication: a lease is published only once the synchronous standby has flushed
//! it, whatever the renewing session's `synchronous_commit` says; a wait that is cancelled or
//! terminated publishes nothing; and after `kill -9` of the primary, the promoted synchronous
//! standby continues above every id the primary handed out, with its clock 30 s behind.
#![cfg(not(feature = "pg_test"))]

use common::*;
use std::time::{Duration, Instant};
use testkit as common;

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    poll(Duration::from_secs(60), Duration::from_millis(50), || {
        done().then_some(()).ok_or_else(|| format!("waiting for {what}"))
    });
}

/// `make test-old-flag` runs this suite against 16.2 with `SNOWFLAKE_FLAG_FORMAT=bool`: the
/// server must then be one whose synchronous-standby flag is the `bool` of before the minor
/// releases of May 2025 (15.13, 16.9, 17.5), or that run would test the newer format twice.
fn check_flag_format(c: &mut Client) {
    let version: i32 = c.scalar("SELECT current_setting('server_version_num')::int");
    let bits_since = match version / 10_000 {
        15 => 150_013,
        16 => 160_009,
        17 => 170_005,
        _ => 0,
    };
    let format = if version >= bits_since { "bits" } else { "bool" };
    eprintln!("server {version}: the synchronous-standby flag is a {format}");
    if let Ok(wanted) = std::env::var("SNOWFLAKE_FLAG_FORMAT") {
        assert_eq!(format, wanted, "server {version} has the other flag format");
    }
}

fn one_string(c: &mut Client, sql: &str) -> String {
    c.scalar(sql)
}

#[test]
fn a_promoted_synchronous_standby_continues_above_whatever_sessions_asked() {
    let primary = Cluster::start_new("sync_primary", &["snowflake.max_drift = '5min'"]);
    let mut p = primary.connect_ext();
    check_flag_format(&mut p);
    let mut old = ids(&mut p, "SELECT snowflake_next() FROM generate_series(1, 10000)");

    // Far enough behind that only the replicated marks keep it above.
    let (standby, _clock) = primary.basebackup_with_clock("sync_standby", -30.0);
    standby.start();
    make_synchronous(&mut p);

    // While the standby is there, sessions with and without synchronous_commit get ids,
    // through two lease renewals each.
    let mut lax = primary.connect();
    lax.batch_execute("SET synchronous_commit = off").unwrap();
    old.extend(ids_through_renewals(&mut p, 2));
    old.extend(ids_through_renewals(&mut lax, 2));

    // Without the standby, a session that turned synchronous_commit off still cannot run past
    // the acknowledged lease: its ids stop, and its statement_timeout cancels the wait.
    standby.stop("fast");
    lax.batch_execute("SET statement_timeout = '3s'").unwrap();
    let lax_pid: i32 = lax.scalar("SELECT pg_backend_pid()");
    let started = Instant::now();
    // A statement that outlives its timeout (a wait that swallowed the cancel) would hang the
    // test: a watchdog ends the session after 20 s, and the checks below then fail.
    let finished = std::sync::atomic::AtomicBool::new(false);
    let error = std::thread::scope(|s| {
        s.spawn(|| {
            while started.elapsed() < Duration::from_secs(20) {
                if finished.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            primary
                .connect()
                .batch_execute(&format!("SELECT pg_terminate_backend({lax_pid})"))
                .unwrap();
        });
        let error = loop {
            match lax.query("SELECT snowflake_next() FROM generate_series(1, 20000)", &[]) {
                Ok(rows) => old.extend(rows.iter().map(|r| r.get::<_, i64>(0))),
                Err(e) => break e,
            }
        };
        finished.store(true, std::sync::atomic::Ordering::Relaxed);
        error
    });
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "ids kept coming, or the wait did not end, for 20 s without the synchronous standby: \
         {error}"
    );
    let db = error.as_db_error().expect("a server error");
    assert_eq!(
        (db.code().code(), db.message()),
        ("57014", "canceling the wait for the synchronous standbys to flush the snowflake lease"),
        "{db:?}"
    );
    assert!(
        db.detail().unwrap_or("").starts_with("Canceling statement due to statement timeout."),
        "{db:?}"
    );
    assert!(db.hint().unwrap_or("").contains("synchronous_standby_names"), "{db:?}");

    // The cancelled wait published nothing: the next caller waits for the same mark, in the
    // synchronous-replication wait event, and pg_terminate_backend ends that wait too.
    let mut next = primary.connect();
    let pid: i32 = next.scalar("SELECT pg_backend_pid()");
    std::thread::scope(|s| {
        let waiter = s.spawn(move || next.query_one("SELECT snowflake_next()", &[]));
        wait_until("the next caller to wait for the standby", || {
            one_string(
                &mut p,
                &format!("SELECT coalesce(wait_event, '') FROM pg_stat_activity WHERE pid = {pid}"),
            ) == "SyncRep"
        });
        p.batch_execute(&format!("SELECT pg_terminate_backend({pid})")).unwrap();
        let result = waiter.join().unwrap();
        let e = result.expect_err("a terminated wait must not hand out an id");
        if let Some(db) = e.as_db_error() {
            assert_eq!(db.code().code(), "57P01", "{db:?}");
        }
    });
    p.batch_execute("SET statement_timeout = '500ms'").unwrap();
    let ServerError { code: state, .. } = expect_error(&mut p, "SELECT snowflake_next()");
    assert_eq!(state, "57014");

    // The primary dies; the standby comes back without it and is promoted.
    primary.crash();
    standby.start();
    standby.promote();
    let new = ids(&mut standby.connect(), "SELECT snowflake_next() FROM generate_series(1, 1000)");
    assert_above_all(&old, &new, "the promotion");
    let behind = "the promoted standby's clock was not behind the old primary's ids";
    standby.assert_logged("ms behind the ids handed out before the restart", behind);
}
