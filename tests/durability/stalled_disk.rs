//! A disk that stalls or fails under a renewal of the lease. The data directory lives on faultfs
//! (`tests/faultfs`, see `common/faultfs.rs`), which holds the fsync of the new state file until
//! the test releases it, or fails its rename.
//!
//! While one session's renewal waits for the disk, the sessions that need the next lease wait
//! for it, and leave that wait on `statement_timeout`, `pg_cancel_backend`,
//! `pg_terminate_backend` and a fast shutdown within a second; the registry's worker leaves it
//! when it is told to stop (SIGTERM). A state file that cannot be replaced fails every call that needs a
//! renewal without writing WAL for each, and ids resume once it can be replaced.
//!
//! Runs alone (scripts/test-suites.py): each wait must end within a second, which a loaded
//! machine would not promise.
#![cfg(not(feature = "pg_test"))]

use common::faultfs::FaultFs;
use common::registry::{grant_lease, member};
use common::*;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use testkit as common;

/// How many sessions wait for the stalled renewal.
const WAITERS: usize = 8;
/// A call that has not come back this long after its wait was ended is held up: the stalled
/// fsync is then released, so that the test fails with the time it took instead of hanging.
const GIVE_UP: Duration = Duration::from_secs(10);

/// A cluster on faultfs. The fields drop in this order: the server stops before the file
/// system goes.
struct DiskCluster {
    cluster: Cluster,
    fs: FaultFs,
}

impl DiskCluster {
    fn start(name: &str, conf: &[&str]) -> DiskCluster {
        DiskCluster::start_cluster(Cluster::init(name, conf))
    }

    fn start_cluster(cluster: Cluster) -> DiskCluster {
        let fs = FaultFs::serve(&cluster);
        cluster.start();
        DiskCluster { cluster, fs }
    }

    /// Stalls the next renewal: holds the next fsync of the new state file and starts a
    /// renewal (an advance 3 s past the ids) in a session of its own, which the returned thread
    /// runs until the fsync is released. Returns once that renewal waits in the fsync and the
    /// lease it could not renew has run out, so that every call from then on needs it. Also
    /// returns the last id handed out before, and the id the renewal advances past.
    fn stall_renewal(&self) -> (std::thread::JoinHandle<Result<(), postgres::Error>>, i64, i64) {
        let mut c = self.cluster.connect_ext();
        // A lease first: the stalled renewal is then the next one, not the first.
        let last: i64 = c.scalar("SELECT snowflake_next()");
        let past = last + (3000 << 22);
        self.fs.ctl("hold fsync pg_snowflake.state.tmp 1");
        let mut renewer = self.cluster.connect();
        let thread = std::thread::spawn(move || {
            renewer.batch_execute(&format!("SELECT snowflake_advance_past({past})"))
        });
        poll(Duration::from_secs(30), Duration::from_millis(5), || {
            (self.fs.ctl("holds") == "ok 1 1")
                .then_some(())
                .ok_or("the renewal did not reach the held fsync".into())
        });
        poll(Duration::from_secs(10), Duration::from_millis(20), || {
            let ran_out: bool = c.scalar(
                "SELECT (snowflake_stats() -> 'lease' ->> 'covered_until')::timestamptz
                            < clock_timestamp()",
            );
            ran_out.then_some(()).ok_or("the lease did not run out".into())
        });
        (thread, last, past)
    }

    /// Ends the stall: the held fsync goes on.
    fn release(&self) {
        self.fs.ctl("release");
    }
}

impl Drop for DiskCluster {
    fn drop(&mut self) {
        // A server process in a held fsync cannot stop until the fsync returns.
        self.fs.ctl_quietly("release");
        self.cluster.stop_if_running();
    }
}

/// What one waiting call got back, and when.
struct Waited {
    pid: i32,
    started: Instant,
    returned: Instant,
    error: Option<(String, String)>,
}

/// `WAITERS` sessions (application_name `waiter`) run `setup`, then each calls
/// `snowflake_next()` while the renewal is stalled. Once all of them wait for it, `end` gets
/// their pids (never, when `wait_seen` is false: a statement_timeout may end a wait before it
/// is seen). Returns each call's outcome and the moment `end` began. A call that has not
/// returned `GIVE_UP` after that releases the stall.
fn waiters(
    dc: &DiskCluster,
    setup: &str,
    wait_seen: bool,
    end: impl FnOnce(&[i32]),
) -> (Vec<Waited>, Instant) {
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    for _ in 0..WAITERS {
        let mut c = dc.cluster.connect();
        c.batch_execute(&format!("SET application_name = 'waiter'; {setup}")).unwrap();
        let tx = tx.clone();
        handles.push(std::thread::spawn(move || {
            let pid: i32 = c.scalar("SELECT pg_backend_pid()");
            let started = Instant::now();
            let result = c.query_one("SELECT snowflake_next()", &[]);
            let returned = Instant::now();
            // A session the server ends may lose its connection before the error arrives.
            let error = result.err().map(|e| match e.as_db_error() {
                Some(db) => (db.code().code().to_string(), db.message().to_string()),
                None => (CLOSED.to_string(), e.to_string()),
            });
            let _ = tx.send(Waited { pid, started, returned, error });
        }));
    }
    drop(tx);
    let mut c = dc.cluster.connect();
    let mut pids = Vec::new();
    if wait_seen {
        // The sessions wait for the renewal: in the wait this fix added (Extension), or, without
        // it, for the renewal lock (LWLock pg_snowflake).
        poll(Duration::from_secs(30), Duration::from_millis(10), || {
            pids = c
                .query(
                    "SELECT pid FROM pg_stat_activity
                      WHERE application_name = 'waiter'
                        AND (wait_event_type = 'Extension'
                             OR (wait_event_type, wait_event) = ('LWLock', 'pg_snowflake'))",
                    &[],
                )
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            (pids.len() == WAITERS)
                .then_some(())
                .ok_or(format!("{} of {WAITERS} sessions wait", pids.len()))
        });
    }
    let began = Instant::now();
    end(&pids);
    let mut done = Vec::new();
    while done.len() < WAITERS {
        match rx.recv_timeout(GIVE_UP.saturating_sub(began.elapsed())) {
            Ok(w) => done.push(w),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                eprintln!("the waits did not end within {GIVE_UP:?}: releasing the stall");
                dc.release();
                done.extend(rx.iter());
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(done.len(), WAITERS, "a waiting session went away");
    (done, began)
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// What a session that the server ends gets: 57P01, or, if the connection closed before the
/// error was read, no error at all (`waiters` records that as `CLOSED`).
const TERMINATED: &str = "57P01";
const CLOSED: &str = "no error from the server";

/// Checks that every call failed with `code` (or lost its connection, for `TERMINATED`) no
/// later than `within` after `from(w)`; returns the latencies, sorted, in ms.
fn ended_within(
    what: &str,
    done: &[Waited],
    code: &str,
    within: Duration,
    from: impl Fn(&Waited) -> Instant,
) -> Vec<u128> {
    let mut latencies: Vec<u128> = done.iter().map(|w| ms(w.returned - from(w))).collect();
    latencies.sort();
    eprintln!("{what}: the {WAITERS} waits ended after {latencies:?} ms");
    for w in done {
        let (got, message) =
            w.error.clone().unwrap_or_else(|| panic!("{what}: session {} got an id", w.pid));
        assert!(
            got == code || (code == TERMINATED && got == CLOSED),
            "{what}: session {}: {got} {message}, not {code}",
            w.pid
        );
        let took = w.returned - from(w);
        assert!(
            took <= within,
            "{what}: session {} came back after {} ms, not within {} ms",
            w.pid,
            ms(took),
            ms(within)
        );
    }
    latencies
}

fn gone(pid: i32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn waits_for_a_stalled_renewal_end_on_statement_timeout_cancel_and_terminate() {
    let dc = DiskCluster::start("stalled_waits", &[]);
    let (renewer, _, past) = dc.stall_renewal();

    // statement_timeout = 500ms: each call ends 0.5 s after it began, a little more at most.
    let (done, _) = waiters(&dc, "SET statement_timeout = '500ms'", false, |_| {});
    let latencies =
        ended_within("statement_timeout", &done, "57014", Duration::from_millis(1500), |w| {
            w.started
        });
    assert!(latencies[0] >= 450, "{latencies:?}: a call ended before its timeout");
    for w in &done {
        let message = &w.error.as_ref().unwrap().1;
        assert_eq!(
            message, "canceling the wait for another session's renewal of the snowflake lease",
            "{message}"
        );
    }

    // pg_cancel_backend: within 1 s of the cancel.
    let (done, began) = waiters(&dc, "", true, |pids| {
        let mut c = dc.cluster.connect();
        for pid in pids {
            c.query_one("SELECT pg_cancel_backend($1)", &[pid]).unwrap();
        }
    });
    ended_within("pg_cancel_backend", &done, "57014", Duration::from_secs(1), |_| began);

    // pg_terminate_backend: within 1 s, and the session is gone.
    let (done, began) = waiters(&dc, "", true, |pids| {
        let mut c = dc.cluster.connect();
        for pid in pids {
            c.query_one("SELECT pg_terminate_backend($1)", &[pid]).unwrap();
        }
    });
    ended_within("pg_terminate_backend", &done, TERMINATED, Duration::from_secs(1), |_| began);
    poll(Duration::from_secs(5), Duration::from_millis(10), || {
        done.iter()
            .all(|w| gone(w.pid))
            .then_some(())
            .ok_or("a terminated session still runs".into())
    });

    // All along, the renewal kept waiting for the disk. Released, it completes, and ids go on
    // above the point it advanced past.
    assert_eq!(dc.fs.ctl("holds"), "ok 1 1", "the stall ended early");
    dc.release();
    renewer.join().unwrap().unwrap();
    let id: i64 = dc.cluster.connect().scalar("SELECT snowflake_next()");
    assert!(id > past);
}

#[test]
fn a_fast_shutdown_is_not_held_up_by_sessions_waiting_for_a_stalled_renewal() {
    let dc = DiskCluster::start("stalled_shutdown", &[]);
    let (renewer, last, _) = dc.stall_renewal();
    let pg_ctl = |args: &[&str]| {
        as_postgres(&dc.cluster.bin("pg_ctl"), &[])
            .args(args)
            .arg("-D")
            .arg(dc.cluster.data())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let postmaster = dc.cluster.postmaster_pid().unwrap();
    let (done, began) = waiters(&dc, "", true, |_| {
        check(pg_ctl(&["stop", "-m", "fast", "-W"]), "pg_ctl stop -m fast -W");
    });
    // Each session got the shutdown's error, and its process ended, within 1 s.
    ended_within("fast shutdown", &done, TERMINATED, Duration::from_secs(1), |_| began);
    let mut exits = Vec::new();
    for w in &done {
        poll(Duration::from_secs(10), Duration::from_millis(5), || {
            gone(w.pid).then_some(()).ok_or(format!("waiting session {} did not exit", w.pid))
        });
        exits.push(ms(began.elapsed()));
    }
    eprintln!("fast shutdown: the waiting sessions' processes were gone {exits:?} ms after it");
    assert!(
        began.elapsed() <= Duration::from_secs(1),
        "the waiting sessions' processes took {} ms to exit",
        ms(began.elapsed())
    );
    // Only the renewal itself, in the fsync, still keeps the server up, as a WAL flush would.
    assert_eq!(dc.fs.ctl("holds"), "ok 1 1");
    assert!(!gone(postmaster), "the server stopped while an fsync was held");
    dc.release();
    let _ = renewer.join().unwrap();
    poll(Duration::from_secs(60), Duration::from_millis(20), || {
        gone(postmaster)
            .then_some(())
            .ok_or("the server did not stop once the fsync was released".into())
    });
    // No waiting session got an id: ids after the restart go on above the last one before.
    dc.cluster.start();
    let id: i64 = dc.cluster.connect().scalar("SELECT snowflake_next()");
    assert!(id > last, "{id} is not above {last}, made before the shutdown");
}

#[test]
fn the_registry_worker_leaves_a_wait_for_a_stalled_renewal_when_told_to_stop() {
    // A registry, and a member on faultfs that leases its worker id from it.
    let hub = Cluster::start_new("stalled_hub", &[]);
    let mut h = hub.connect_ext();
    grant_lease(&mut h, "fleet");
    let dc = DiskCluster::start_cluster(member("stalled_member", &hub, "fleet", &[]));
    let mut m = dc.cluster.connect_ext();
    poll(Duration::from_secs(30), Duration::from_millis(50), || {
        m.query_one("SELECT snowflake_next()", &[])
            .map(|_| ())
            .map_err(|e| format!("no lease yet: {:?}", db_error(&e)))
    });
    let (renewer, _, _) = dc.stall_renewal();
    // The registry now says the worker id's previous holders covered ids until 2 s from now:
    // at its next renewal the worker must raise the generator's floor, which it does under the
    // renewal lock, so it waits for the stalled renewal.
    let raised_at: f64 = h
        .scalar("WITH u AS (UPDATE snowflake.snowflake_registry
                           SET start_above_ms = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
                                                + 2000
                         RETURNING 1)
             SELECT extract(epoch FROM clock_timestamp())::float8 FROM u");
    // The worker has no database connection, so pg_stat_activity does not list it: it is the
    // postmaster's child whose process title names it.
    let out = std::process::Command::new("pgrep")
        .args(["-P", &dc.cluster.postmaster_pid().unwrap().to_string()])
        .args(["-f", "pg_snowflake registry"])
        .output()
        .unwrap();
    let pid: i32 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no registry worker: {out:?}"));
    // The registry answered the worker after the change, and the worker has not finished
    // with that answer: it waits for the renewal lock.
    poll(Duration::from_secs(30), Duration::from_millis(10), || {
        let answered: bool = h.scalar_with(
            "SELECT bool_and(renewed > to_timestamp($1)) FROM snowflake.snowflake_registry",
            &[&raised_at],
        );
        answered.then_some(()).ok_or("the worker did not ask the registry again".into())
    });
    let renewed_s: f64 = m.scalar(
        "SELECT extract(epoch FROM (snowflake_stats() -> 'registry' ->> 'renewed')::timestamptz)
                    ::float8",
    );
    assert!(renewed_s < raised_at, "the worker got past the stalled renewal");
    let began = Instant::now();
    // SIGTERM, what a shutdown sends it (pg_terminate_backend() takes only processes with a
    // database connection).
    check(
        std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).output().unwrap(),
        "kill -TERM",
    );
    let deadline = began + GIVE_UP;
    while !gone(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = began.elapsed();
    eprintln!("registry worker: gone {} ms after SIGTERM", ms(took));
    dc.release();
    renewer.join().unwrap().unwrap();
    assert!(
        took <= Duration::from_secs(1),
        "the registry's worker took {} ms to stop while a renewal was stalled",
        ms(took)
    );
    // The postmaster starts the worker again (after 5 s), which raises the floor; ids go on.
    poll(Duration::from_secs(30), Duration::from_millis(100), || {
        m.query_one("SELECT snowflake_next()", &[])
            .map(|_| ())
            .map_err(|e| format!("no ids after the stall: {:?}", db_error(&e)))
    });
}

/// The WAL position of the server behind `c`.
fn wal_insert_lsn(c: &mut Client) -> String {
    c.scalar("SELECT pg_current_wal_insert_lsn()::text")
}

#[test]
fn a_state_file_that_cannot_be_replaced_costs_no_wal_per_failing_call_and_ids_resume() {
    let dc = DiskCluster::start("unreplaceable", &[]);
    let mut c = dc.cluster.connect_ext();
    let mut highest: i64 = c.scalar("SELECT snowflake_next()");
    // The state file, then its copy, cannot be replaced: a rename over it fails as over a file
    // made immutable with chattr +i (EPERM).
    for (file, rule) in [
        ("pg_snowflake.state", "fail rename pg_snowflake.state.tmp EPERM"),
        ("pg_snowflake/mark", "fail rename pg_snowflake/mark.tmp EPERM"),
    ] {
        dc.fs.ctl(rule);
        // The lease in force runs out within 1.5 s; from then on each call needs the disk.
        poll(Duration::from_secs(10), Duration::from_millis(10), || {
            match c.query_one("SELECT snowflake_next()", &[]) {
                Ok(row) => {
                    highest = highest.max(row.get(0));
                    Err("the lease has not run out yet".into())
                }
                Err(_) => Ok(()),
            }
        });
        let (faults, before, began) =
            (dc.fs.stat("faults"), wal_insert_lsn(&mut c), Instant::now());
        for i in 0..2000 {
            let ServerError { code: state, message, hint, .. } =
                expect_error(&mut c, "SELECT snowflake_next()");
            assert_eq!(state, "58030", "call {i}: {message}");
            assert!(
                message.starts_with(&format!(
                    "could not write the snowflake state file \"{file}\": Operation not permitted"
                )),
                "call {i}: {message}"
            );
            assert!(hint.contains("free space and permissions"), "{hint}");
        }
        let (took, after) = (began.elapsed(), wal_insert_lsn(&mut c));
        let wal: i64 = c.scalar_with(
            "SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)::int8",
            &[&after, &before],
        );
        let tries = dc.fs.stat("faults") - faults;
        eprintln!(
            "{file}: 2000 failing calls in {} ms wrote {wal} bytes of WAL and tried the disk \
             {tries} times",
            ms(took)
        );
        // A mark record takes 56 bytes: one per call would be 112,000.
        assert!(wal < 16384, "{file}: {wal} bytes of WAL for 2000 failing calls");
        // The disk is tried at most once a second (and once more at the start).
        assert!(
            tries <= took.as_secs() + 2,
            "{file}: the disk was tried {tries} times in {} ms",
            ms(took)
        );
        // Once the file can be replaced, ids resume within a second or so.
        dc.fs.ctl("clear");
        let cleared = Instant::now();
        poll(Duration::from_secs(5), Duration::from_millis(20), || {
            let row = c
                .query_one("SELECT snowflake_next()", &[])
                .map_err(|e| format!("{:?}", db_error(&e)))?;
            let id: i64 = row.get(0);
            assert!(id > highest, "{id} is not above {highest}");
            highest = id;
            Ok(())
        });
        eprintln!("{file}: ids resumed {} ms after the fault was cleared", ms(cleared.elapsed()));
        assert!(dc.cluster.data().join(file).exists(), "{file} is not in place");
    }
}
