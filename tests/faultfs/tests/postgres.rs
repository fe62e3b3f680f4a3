//! PostgreSQL on faultfs: committed rows survive power cuts, and with asynchronous commit
//! rows are lost but crash recovery still starts the server on the durable state.
//!
//! These run faultfs with `--journal`: PostgreSQL creates relation files without fsyncing
//! their directory and relies on the file system's journal to make the name durable with
//! the file's fsync at the next checkpoint (true of ext4 and xfs). The last test shows that
//! under the default, stricter model a table created before a checkpoint is lost.
//!
//! Needs PostgreSQL's server binaries (`PG_BIN`, default Debian's
//! /usr/lib/postgresql/15/bin) and a `postgres` user; fails, does not skip, without them.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

fn pg_bin() -> PathBuf {
    let bin = PathBuf::from(
        std::env::var("PG_BIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".into()),
    );
    assert!(
        bin.join("postgres").is_file(),
        "PostgreSQL server binaries not found in {} (set PG_BIN; on Debian: apt-get install postgresql-15)",
        bin.display()
    );
    bin
}

fn postgres_ids() -> (u32, u32) {
    let out = Command::new("id").arg("-u").arg("postgres").output().unwrap();
    assert!(
        out.status.success(),
        "these tests run PostgreSQL as the `postgres` user, which does not exist"
    );
    let uid = String::from_utf8(out.stdout).unwrap().trim().parse().unwrap();
    let out = Command::new("id").arg("-g").arg("postgres").output().unwrap();
    let gid = String::from_utf8(out.stdout).unwrap().trim().parse().unwrap();
    (uid, gid)
}

/// A directory owned by `postgres`.
fn pg_dir(path: &Path) -> PathBuf {
    let (uid, gid) = postgres_ids();
    fs::create_dir(path).unwrap();
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o700)).unwrap();
    path.to_path_buf()
}

/// A PostgreSQL server whose data directory is a faultfs mount.
struct Pg {
    bin: PathBuf,
    data: PathBuf,
    sock: PathBuf,
    log: PathBuf,
    options: String,
    postmaster: Option<u32>,
}

impl Pg {
    fn as_postgres(&self, program: &str) -> Command {
        let mut c = Command::new("runuser");
        c.arg("-u").arg("postgres").arg("--").arg(self.bin.join(program));
        c
    }

    fn start(&mut self) {
        let out = self
            .as_postgres("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .arg("-o")
            .arg(format!(
                "-p 5432 -k {} -c listen_addresses='' {}",
                self.sock.display(),
                self.options
            ))
            .arg("-l")
            .arg(&self.log)
            .args(["-w", "-t", "120", "start"])
            .output()
            .unwrap();
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        assert!(
            out.status.success(),
            "PostgreSQL did not start on faultfs:\n{}\n{log}",
            String::from_utf8_lossy(&out.stdout)
        );
        let pid = fs::read_to_string(self.data.join("postmaster.pid")).unwrap();
        self.postmaster = Some(pid.lines().next().unwrap().trim().parse().unwrap());
    }

    fn psql(&self, sql: &str) -> String {
        self.try_psql(sql).unwrap_or_else(|e| panic!("psql -c {sql:?}: {e}"))
    }

    fn try_psql(&self, sql: &str) -> Result<String, String> {
        let out = self
            .as_postgres("psql")
            .arg("-h")
            .arg(&self.sock)
            .args([
                "-p",
                "5432",
                "-U",
                "postgres",
                "-X",
                "-q",
                "-At",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ])
            .output()
            .unwrap();
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(String::from_utf8(out.stdout).unwrap().trim().to_string())
    }

    /// Runs a script of statements, each in its own transaction (psql -f).
    fn psql_script(&self, script: &str) {
        let path = self.sock.join("script.sql");
        fs::write(&path, script).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let out = self
            .as_postgres("psql")
            .arg("-h")
            .arg(&self.sock)
            .args(["-p", "5432", "-U", "postgres", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "psql -f: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn count(&self) -> u64 {
        self.psql("select count(*) from t").parse().unwrap()
    }

    /// Kills every process of the server at once (SIGKILL), as a power cut does, and waits
    /// until they are gone (so that the next server does not see them in its lock files).
    fn crash(&mut self) {
        let Some(pm) = self.postmaster.take() else {
            return;
        };
        // SAFETY: signals to processes this test started; SIGSTOP first so that the
        // postmaster forks no new child while its children are collected.
        unsafe { libc::kill(pm as i32, libc::SIGSTOP) };
        let mut pids = children_of(pm);
        pids.push(pm);
        for &p in &pids {
            // SAFETY: as above.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while pids.iter().any(|p| Path::new(&format!("/proc/{p}")).exists())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        remove_shared_memory_of(pm);
    }

    fn stop(&mut self) {
        let out = self
            .as_postgres("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "fast", "-w", "stop"])
            .output()
            .unwrap();
        assert!(out.status.success(), "pg_ctl stop: {}", String::from_utf8_lossy(&out.stderr));
        self.postmaster = None;
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        self.crash();
        if std::thread::panicking() {
            eprintln!("PostgreSQL log:\n{}", fs::read_to_string(&self.log).unwrap_or_default());
        }
    }
}

/// The pids whose parent is `parent`, from /proc.
fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // Fields after the command name, which is in parentheses and may hold spaces.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        if rest.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(parent) {
            out.push(pid);
        }
    }
    out
}

/// The killed postmaster's System V shared memory segment outlives it; the new server (on
/// a new mount, so another st_dev) takes another key, so remove the old one here.
fn remove_shared_memory_of(pid: u32) {
    let Ok(table) = fs::read_to_string("/proc/sysvipc/shm") else {
        return;
    };
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        // key shmid perms size cpid lpid nattch ...
        if f.len() > 6 && f[4] == pid.to_string() && f[6] == "0" {
            if let Ok(id) = f[1].parse::<i32>() {
                // SAFETY: removing a segment that the killed server created.
                unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
            }
        }
    }
}

/// initdb on a plain disk, imported into faultfs, mounted; a server configured but not
/// started.
fn setup(tag: &str, faultfs_options: &[&str], options: &str) -> (TempDir, Faultfs, Pg) {
    require_root();
    let bin = pg_bin();
    let tmp = TempDir::new(tag);
    let init = pg_dir(&tmp.0.join("init"));
    let out = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(bin.join("initdb"))
        .arg("-D")
        .arg(init.join("data"))
        .args(["-A", "trust", "-U", "postgres", "-N"])
        .output()
        .unwrap();
    assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
    let f = Faultfs::import(tag, &init.join("data"), faultfs_options);
    let sock = pg_dir(&tmp.0.join("s"));
    let pg = Pg {
        bin,
        data: f.mnt.clone(),
        log: sock.join("server.log"),
        sock,
        options: options.into(),
        postmaster: None,
    };
    (tmp, f, pg)
}

fn inserts(from: u64, to: u64) -> String {
    (from..to).map(|i| format!("insert into t values ({i}, repeat('x', 200));\n")).collect()
}

#[test]
fn committed_rows_survive_power_cuts() {
    let (_tmp, mut f, mut pg) = setup("pg-sync", &["--journal"], "");
    pg.start();
    pg.psql("create table t (i int primary key, pad text)");
    pg.psql("create extension amcheck");
    let mut rows = 0;
    for round in 0..3 {
        let fsyncs = f.stat("fsyncs");
        let t = Instant::now();
        pg.psql_script(&inserts(rows, rows + 300));
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "round {round}: 300 single-row commits in {secs:.2} s ({:.0} commits/s)",
            300.0 / secs
        );
        // Exercise checkpoints (data file fsyncs) and WAL segment switches (new files,
        // renames, directory fsyncs) between commits.
        pg.psql("checkpoint");
        pg.psql_script(&inserts(rows + 300, rows + 400));
        pg.psql("select pg_switch_wal()");
        pg.psql_script(&inserts(rows + 400, rows + 500));
        rows += 500;
        assert!(f.stat("fsyncs") >= fsyncs + 500, "each commit fsyncs the WAL through faultfs");
        eprintln!("round {round}: before the cut: {}", f.ctl("stats"));

        pg.crash();
        f.power_cut();
        pg.start();
        assert_eq!(pg.count(), rows, "round {round}: every committed row survives");
        assert_eq!(pg.psql("select max(i) + 1 from t"), rows.to_string());
        pg.psql("select bt_index_check('t_pkey', true)");
    }
    pg.stop();
}

#[test]
fn asynchronous_commit_loses_rows_but_recovery_succeeds() {
    // The WAL writer flushes at most every 10 s and no other process flushes WAL, so the
    // asynchronously committed tail is written to faultfs but never fsynced.
    let options = "-c autovacuum=off -c bgwriter_lru_maxpages=0 -c wal_writer_delay=10s -c wal_writer_flush_after=1GB";
    let (_tmp, mut f, mut pg) = setup("pg-async", &["--journal"], options);
    pg.start();
    pg.psql("create table t (i int primary key, pad text)");
    pg.psql("create extension amcheck");
    pg.psql_script(&inserts(0, 100));
    let mut durable = 100;
    for round in 0..2 {
        let total = durable + 2000;
        let mut script = String::from("set synchronous_commit = off;\n");
        script.push_str(&inserts(durable, total));
        pg.psql_script(&script);
        assert_eq!(pg.count(), total);
        let dirty = f.stat("dirty_bytes");
        pg.crash();
        f.power_cut();
        pg.start();
        let n = pg.count();
        eprintln!("round {round}: {n} of {total} rows after the cut ({dirty} bytes of unsynced file data lost)");
        assert!(
            n >= durable,
            "round {round}: synchronously committed rows are kept ({n} < {durable})"
        );
        assert!(
            n < total,
            "round {round}: the unsynced WAL tail must be lost ({n} of {total} rows)"
        );
        assert_eq!(
            pg.psql("select coalesce(max(i) + 1, 0) from t"),
            n.to_string(),
            "the survivors are a prefix of the commits"
        );
        pg.psql("select bt_index_check('t_pkey', true)");
        // Make the survivors durable for the next round.
        pg.psql("checkpoint");
        durable = n;
    }
    pg.stop();
}

#[test]
fn strict_model_loses_a_table_created_before_a_checkpoint() {
    // PostgreSQL's mdcreate() never fsyncs the directory of a new relation file; the
    // checkpoint fsyncs the file only. Under the strict model the file's name is not
    // durable, and as the checkpoint moved the redo point past the WAL record that created
    // it, recovery cannot bring it back.
    let (_tmp, mut f, mut pg) = setup("pg-strict", &[], "");
    pg.start();
    pg.psql("create table t (i int primary key, pad text)");
    pg.psql_script(&inserts(0, 10));
    pg.psql("checkpoint");
    pg.crash();
    f.power_cut();
    pg.start();
    let err = pg
        .try_psql("select count(*) from t")
        .expect_err("the table's file should be gone under the strict model");
    assert!(err.contains("could not open file"), "unexpected error: {err}");
}
