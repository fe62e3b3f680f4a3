//! Power cuts and disk faults. Every other test crashes servers with `kill -9`, which keeps the
//! kernel's page cache: no test there can notice a missing flush or fsync. Here the data
//! directory lives on faultfs (`tests/faultfs`, see `common/faultfs.rs`), which loses whatever
//! was not made durable when the power is cut, and fails chosen operations on command.
//!
//! A power cut: writers take ids (inserts that commit, and plain `SELECT snowflake_next()`)
//! and record every id the server acknowledged; at a seeded moment every server process and
//! the file system die at once; the server starts on what was durable, with its clock set back
//! 15 s. Every id it makes then must be above every id acknowledged before, and every
//! acknowledged insert must be there. Some cuts come at random moments, some while a renewal of
//! the lease is in flight (faultfs holds the fsync of the new state file until the power goes),
//! and one right after a checkpoint, when WAL replay no longer has the last mark and only the
//! state file does (ids then lie above every mark but the last). `POWER_LOSS_SEED` replays a
//! run.
#![cfg(not(feature = "pg_test"))]

use common::faultfs::FaultFs;
use common::*;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use testkit as common;

/// How far back the clock is at each start after a power cut. A start on faultfs, with crash
/// recovery syncing the whole data directory first, takes seconds: the clock must stay behind
/// the ids acknowledged before the cut by more than that, or it alone would keep new ids above
/// them. snowflake.max_drift is raised to match (`MAX_DRIFT`).
const BACK_S: f64 = -15.0;
const MAX_DRIFT: &str = "snowflake.max_drift = '60s'";

/// A cluster on faultfs. The fields drop in this order, and `drop` stops the server first.
struct PowerCluster {
    cluster: Cluster,
    clock: FakeClock,
    fs: FaultFs,
}

impl PowerCluster {
    fn start(name: &str, conf: &[&str]) -> PowerCluster {
        let mut cluster = Cluster::init(name, conf);
        let clock = cluster.use_fake_clock();
        let fs = FaultFs::serve(&cluster);
        cluster.start();
        PowerCluster { cluster, clock, fs }
    }

    /// Cuts the power (if `cut` has not), then starts the server on what was durable with its
    /// clock `offset_s` from the real time.
    fn restart_after_cut(&mut self, offset_s: f64) {
        self.clock.set(offset_s);
        self.cluster.start();
    }

    /// Cuts the power, then starts the server on what was durable with its clock `offset_s`
    /// from the real time.
    fn power_cut(&mut self, offset_s: f64) {
        self.fs.power_cut(&self.cluster);
        self.restart_after_cut(offset_s);
    }
}

impl Drop for PowerCluster {
    fn drop(&mut self) {
        self.cluster.stop_if_running();
    }
}

/// What the writers got back before the power went.
#[derive(Default)]
struct Acknowledged {
    /// Ids of committed inserts: their rows must survive.
    inserted: Vec<i64>,
    /// Ids of plain `SELECT snowflake_next()`: handed out, never stored.
    drawn: Vec<i64>,
}

/// Four writers (two inserting one row per transaction, two drawing 50 ids per statement) on
/// `cluster` while `cut()` runs, which cuts the power under them; every id the server
/// acknowledged is recorded. A writer stops at its first error (the server is gone).
fn write_until(cluster: &Cluster, cut: impl FnOnce()) -> Acknowledged {
    let acked = Mutex::new(Acknowledged::default());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for w in 0..4 {
            let (acked, stop) = (&acked, &stop);
            let mut c = cluster.connect();
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if w < 2 {
                        match c.query_one("INSERT INTO t DEFAULT VALUES RETURNING id", &[]) {
                            Ok(row) => acked.lock().unwrap().inserted.push(row.get(0)),
                            Err(_) => return,
                        }
                    } else {
                        match c.query("SELECT snowflake_next() FROM generate_series(1, 50)", &[]) {
                            Ok(rows) => acked
                                .lock()
                                .unwrap()
                                .drawn
                                .extend(rows.iter().map(|r| r.get::<_, i64>(0))),
                            Err(_) => return,
                        }
                    }
                }
            });
        }
        // The writers stop also when `cut` panics: the scope waits for them before the panic
        // goes on.
        let _stop = StopOnDrop(&stop);
        cut();
    });
    acked.into_inner().unwrap()
}

/// After the restart: every acknowledged insert is there, and new ids (through the default and
/// drawn) are above every id acknowledged before. Returns the largest new id.
fn check_after(cluster: &Cluster, before: &Acknowledged, what: &str) -> i64 {
    let mut c = cluster.connect();
    let highest = before
        .inserted
        .iter()
        .chain(&before.drawn)
        .max()
        .copied()
        .unwrap_or_else(|| panic!("{what}: the writers got no id before the cut"));
    let lost: i64 = c.scalar_with(
        "SELECT count(*) FROM unnest($1::bigint[]) a(id)
             WHERE NOT EXISTS (SELECT FROM t WHERE t.id = a.id)",
        &[&before.inserted],
    );
    assert_eq!(lost, 0, "{what}: acknowledged inserts were lost");
    let new = ids(
        &mut c,
        "WITH i AS (INSERT INTO t SELECT FROM generate_series(1, 100) RETURNING id)
         SELECT id FROM i UNION ALL SELECT snowflake_next() FROM generate_series(1, 100)",
    );
    let lowest = *new.iter().min().unwrap();
    assert!(
        lowest > highest,
        "{what}: an id after the power cut, {lowest}, is not above {highest}, acknowledged before"
    );
    *new.iter().max().unwrap()
}

/// The power cuts on one server: at random moments, while renewals are in flight, and right
/// after a checkpoint.
#[test]
fn ids_after_power_cuts_are_above_every_acknowledged_one() {
    let mut rng = Rng(seed("POWER_LOSS_SEED", "power loss"));
    let mut pc = PowerCluster::start("power_cut", &[MAX_DRIFT]);
    pc.cluster
        .connect_ext()
        .batch_execute("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next())")
        .unwrap();
    let (mut cuts, mut in_flight, mut held_cuts) = (0, 0, 0);
    let tmp = pc.cluster.data().join("pg_snowflake.state.tmp");
    // At random moments: 0.2 to 1.7 s into the load, across about one and a half renewals.
    for i in 0..5 {
        pc.clock.set(0.0);
        let at = Duration::from_millis(200 + rng.below(1500));
        let (cluster, fs) = (&pc.cluster, &mut pc.fs);
        let acked = write_until(cluster, || {
            std::thread::sleep(at);
            let killed = cluster.kill_all();
            // A renewal between writing its new state file and putting it in place.
            in_flight += usize::from(tmp.exists());
            fs.cut();
            killed.wait();
        });
        pc.restart_after_cut(BACK_S);
        cuts += 1;
        check_after(&pc.cluster, &acked, &format!("random cut {i} at {at:?}"));
    }
    // While a renewal is in flight: its fsync of the new state file waits in faultfs until the
    // power goes. The writers go on under the lease they have, and then wait for the renewal.
    for i in 0..3 {
        pc.clock.set(0.0);
        // The restarted server has no lease yet: take one first, so that the held renewal is
        // one the writers run into, not the first.
        let first: i64 = pc.cluster.connect().scalar("SELECT snowflake_next()");
        pc.fs.ctl("hold fsync pg_snowflake.state.tmp 1");
        let (cluster, fs) = (&pc.cluster, &mut pc.fs);
        let mut held = false;
        let mut acked = write_until(cluster, || {
            poll(Duration::from_secs(30), Duration::from_millis(5), || {
                (fs.ctl("holds") == "ok 1 1")
                    .then_some(())
                    .ok_or("no renewal reached the held fsync".into())
            });
            // Let the writers run into the end of the lease meanwhile: the renewal began 500 ms
            // before it, so from the second cut on they reach it.
            std::thread::sleep(Duration::from_millis(100 + 400 * i));
            // Still held when the power goes: one fsync waits, the one caught.
            held = fs.ctl("holds") == "ok 1 1";
            fs.power_cut(cluster);
        });
        in_flight += usize::from(held);
        held_cuts += usize::from(held);
        acked.drawn.push(first);
        pc.restart_after_cut(BACK_S);
        cuts += 1;
        check_after(&pc.cluster, &acked, &format!("cut {i} during a renewal"));
    }
    // Right after a checkpoint: WAL replay starts there, so a mark written before it is only in
    // the state file. `snowflake_advance_past()` writes a mark 2 s ahead of the clock, the
    // checkpoint follows, the writers get ids above that point, and the power goes long before
    // the next renewal (whose mark WAL replay would find): only the state file can bring the
    // server back above those ids.
    pc.clock.set(0.0);
    let mut c = pc.cluster.connect();
    let ahead: i64 = c.scalar("SELECT snowflake_next() + (2000::bigint << 22)");
    c.batch_execute(&format!("SELECT snowflake_advance_past({ahead})")).unwrap();
    c.batch_execute("CHECKPOINT").unwrap();
    let (cluster, fs) = (&pc.cluster, &mut pc.fs);
    let acked = write_until(cluster, || {
        std::thread::sleep(Duration::from_millis(300));
        fs.power_cut(cluster);
    });
    assert!(
        acked.drawn.iter().all(|&id| id > ahead),
        "the writers got ids below the advanced point"
    );
    pc.restart_after_cut(BACK_S);
    cuts += 1;
    check_after(&pc.cluster, &acked, "cut right after a checkpoint");
    eprintln!("power loss: {cuts} power cuts, {in_flight} of them with a renewal in flight");
    // Each of the three held cuts was seen held at the moment of the cut (the random ones catch
    // a renewal in flight or not, as it happens).
    assert_eq!(
        held_cuts, 3,
        "only {held_cuts} of the 3 cuts during a renewal came while its fsync was held"
    );
}

/// A synchronous standby, promoted after the primary's power cut: it continues above every id
/// the primary acknowledged, although the primary's clock ran 30 s ahead; and after a power cut
/// of its own, the promoted standby still does.
#[test]
fn a_standby_promoted_after_the_primarys_power_cut_continues_above_it() {
    let mut primary = PowerCluster::start("power_primary", &[MAX_DRIFT]);
    primary.clock.set(30.0);
    primary
        .cluster
        .connect_ext()
        .batch_execute("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next())")
        .unwrap();
    let (standby_cluster, standby_clock) =
        primary.cluster.basebackup_with_clock("power_standby", 0.0);
    let standby_fs = FaultFs::serve(&standby_cluster);
    standby_cluster.start();
    let mut standby =
        PowerCluster { cluster: standby_cluster, clock: standby_clock, fs: standby_fs };
    let mut p = primary.cluster.connect();
    make_synchronous(&mut p);
    drop(p);
    let (cluster, fs) = (&primary.cluster, &mut primary.fs);
    let acked = write_until(cluster, || {
        std::thread::sleep(Duration::from_secs(2));
        fs.power_cut(cluster);
    });
    standby.cluster.promote();
    let highest = check_after(&standby.cluster, &acked, "the promoted standby");
    // The promoted standby loses power too, with its clock 15 s back: its state file, written by
    // redo and by its own renewals, brings it back above everything.
    let (cluster, fs) = (&standby.cluster, &mut standby.fs);
    let mut more = write_until(cluster, || {
        std::thread::sleep(Duration::from_secs(1));
        fs.power_cut(cluster);
    });
    standby.restart_after_cut(BACK_S);
    more.drawn.push(highest);
    more.inserted.extend(acked.inserted);
    check_after(&standby.cluster, &more, "the promoted standby after its own power cut");
}

/// ENOSPC and EIO on the state file and on WAL: clear errors, never an id above a mark that is
/// not durable, and normal service once the fault clears.
#[test]
fn disk_faults_fail_calls_clearly_and_service_resumes() {
    let mut pc = PowerCluster::start("disk_faults", &[MAX_DRIFT]);
    let mut c = pc.cluster.connect_ext();
    c.batch_execute("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next())").unwrap();
    let mut highest: i64 = c.scalar("SELECT snowflake_next()");
    let new_lease = |c: &mut Client| {
        // A call past the current lease needs a renewal: advance beyond it.
        c.batch_execute("SELECT snowflake_advance_past(snowflake_next() + (2000::bigint << 22))")
    };
    // The state file: its temporary file cannot be written, synced, or put in place.
    for (rule, why) in [
        ("fail write pg_snowflake.state.tmp ENOSPC", "No space left on device"),
        ("fail fsync pg_snowflake.state.tmp EIO", "Input/output error"),
        ("fail fsyncdir . EIO", "Input/output error"),
    ] {
        let faults = pc.fs.stat("faults");
        pc.fs.ctl(rule);
        let err = new_lease(&mut c).unwrap_err();
        let ServerError { code: state, message, .. } = db_error(&err);
        assert_eq!(state, "58030", "{rule}: {message}");
        assert!(
            message.starts_with("could not write the snowflake state file")
                && message.contains(why),
            "{rule}: {message}"
        );
        assert!(pc.fs.stat("faults") > faults, "{rule}: the fault did not take effect");
        // No id came from the renewal that failed: a power cut now, with the clock back,
        // still gives ids above every one handed out.
        pc.fs.ctl("clear");
        let acked = Acknowledged { inserted: vec![], drawn: vec![highest] };
        drop(c);
        pc.power_cut(BACK_S);
        highest = check_after(&pc.cluster, &acked, rule);
        c = pc.cluster.connect();
        new_lease(&mut c).unwrap();
        highest = highest.max(c.scalar("SELECT snowflake_next()"));
    }
    // WAL: PostgreSQL itself PANICs when it cannot write or flush WAL (a retried fsync may
    // report success for data already lost). A renewal that meets it ends with the server; the
    // lease it was writing was never published, and after the fault clears the server recovers
    // above every id.
    for rule in ["fail write pg_wal/0* ENOSPC", "fail fsync pg_wal/0* EIO"] {
        const ABORTED: &str = "was terminated by signal 6";
        let log = pc.cluster.log();
        let (panics, aborts) = (log.matches("PANIC:").count(), log.matches(ABORTED).count());
        pc.fs.ctl(rule);
        let _ = new_lease(&mut c);
        // The postmaster's answer to the PANIC too: between the PANIC's line and the
        // postmaster's reaping of that process, a new connection still got in, and the server
        // went into recovery under the next step's feet (seen once with two suites running).
        poll(Duration::from_secs(30), Duration::from_millis(100), || {
            let log = pc.cluster.log();
            (log.matches("PANIC:").count() > panics && log.matches(ABORTED).count() > aborts)
                .then_some(())
                .ok_or(format!("{rule}: no PANIC, or the postmaster did not see it"))
        });
        pc.fs.ctl("clear");
        // The postmaster restarts after the PANIC, or stops if recovery cannot start: either
        // way, with the fault gone, the server comes back.
        poll(Duration::from_secs(60), Duration::from_millis(200), || {
            match Client::connect(&pc.cluster.conninfo("postgres"), NoTls) {
                Ok(_) => Ok(()),
                Err(_) => {
                    if pc.cluster.postmaster_pid().is_none()
                        || !Path::new(&format!("/proc/{}", pc.cluster.postmaster_pid().unwrap()))
                            .exists()
                    {
                        pc.cluster.start();
                    }
                    Err(format!("{rule}: the server did not come back"))
                }
            }
        });
        let acked = Acknowledged { inserted: vec![], drawn: vec![highest] };
        highest = check_after(&pc.cluster, &acked, rule);
        c = pc.cluster.connect();
    }
}
