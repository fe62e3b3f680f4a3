//! What someone who can write to the data directory may put under pg_snowflake's file names: a
//! FIFO, a link to `/dev/zero`, a 3 GB sparse file. In 0.4.0 a FIFO blocked the postmaster in
//! `open()` before it logged a line (`pg_ctl start` timed out, and only SIGKILL stopped it), and
//! the link and the huge file were read whole until memory ran out, at start and at every reset
//! after a backend crash. Now each file is opened without blocking, must be a regular file no
//! larger than its format, and is read no further (core/src/data_file.rs): the state file refuses the
//! start with a FATAL naming the file and what it is; a damaged copy or lease cache is reported
//! and ignored (the state file, or the registry, decides).
//!
//! Majors: 17. How the extension opens and reads its files (core/src/data_file.rs) is the same code
//! on every major. On 17, the server built with assertions.
#![cfg(not(feature = "pg_test"))]

use common::*;
use std::path::Path;
use std::time::{Duration, Instant};
use testkit as common;

#[derive(Clone, Copy, Debug)]
enum Planted {
    Fifo,
    DevZero,
    Huge,
}

const ALL: [Planted; 3] = [Planted::Fifo, Planted::DevZero, Planted::Huge];

impl Planted {
    /// Puts it at `path`, in place of whatever was there.
    fn plant(self, path: &Path) {
        let _ = std::fs::remove_file(path);
        match self {
            Planted::Fifo => {
                let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
                // SAFETY: a NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }
            Planted::DevZero => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
            // Sparse: no disk is used.
            Planted::Huge => std::fs::File::create(path).unwrap().set_len(3 << 30).unwrap(),
        }
        if running_as_root() {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
            let pw = postgres_ids();
            // SAFETY: a NUL-terminated path; lchown does not follow the link.
            unsafe { libc::lchown(c.as_ptr(), pw.0, pw.1) };
        }
    }

    /// What the server must say it is.
    fn described(self) -> &'static str {
        match self {
            Planted::Fifo => "it is a FIFO (named pipe), not a regular file",
            Planted::DevZero => "it is a character device, not a regular file",
            Planted::Huge => "it holds 3221225472 bytes, more than the",
        }
    }
}

/// The uid and gid of `postgres`, who owns the data directory.
fn postgres_ids() -> (u32, u32) {
    let name = std::ffi::CString::new("postgres").unwrap();
    // SAFETY: getpwnam returns NULL or a pointer to a static record, read at once.
    unsafe {
        let pw = libc::getpwnam(name.as_ptr());
        assert!(!pw.is_null(), "no user postgres");
        ((*pw).pw_uid, (*pw).pw_gid)
    }
}

/// Waits (at most `within`) for the postmaster of `cluster` to be gone: a refused start must
/// end the process, not leave it blocked.
fn gone(cluster: &Cluster, within: Duration, what: &str) {
    poll(within, Duration::from_millis(20), || match live_postmaster_pid(&cluster.data()) {
        None => Ok(()),
        Some(pid) => Err(format!("{what}: postmaster {pid} is still there")),
    });
}

/// The state file replaced by each planted thing: the start is refused at once, with a FATAL
/// that names the file and says what is there, and the postmaster is gone; never a hang. With
/// the file back, the ids go on above the old ones.
#[test]
fn a_state_file_that_is_not_a_regular_file_of_its_size_refuses_the_start_at_once() {
    let cluster = Cluster::start_new("planted_state_file", &[]);
    let before =
        ids(&mut cluster.connect_ext(), "SELECT snowflake_next() FROM generate_series(1, 1000)");
    cluster.stop("fast");
    let state = cluster.data().join("pg_snowflake.state");
    let good = files::read(&state).unwrap();
    for planted in ALL {
        planted.plant(&state);
        let started = Instant::now();
        let log = cluster.start_fails();
        gone(&cluster, Duration::from_secs(10), &format!("{planted:?}"));
        let took = started.elapsed();
        let expected = format!(
            "FATAL:  could not read the snowflake state file \"pg_snowflake.state\": {}",
            planted.described()
        );
        assert!(log.contains(&expected), "{planted:?}: the log lacks {expected:?}:\n{log}");
        eprintln!("{planted:?} in place of the state file: refused in {took:?}");
        assert!(took < Duration::from_secs(10), "{planted:?}: the refusal took {took:?}");
    }
    std::fs::remove_file(&state).unwrap();
    files::write(&state, &good).unwrap();
    cluster.start();
    let after = ids(&mut cluster.connect_ext(), "SELECT snowflake_next()");
    assert!(after[0] > *before.last().unwrap());
}

/// The state file replaced by a FIFO while the server runs, then a backend crash: the reset
/// reads the file again, refuses with the same FATAL, and the postmaster exits instead of
/// blocking in `open()`.
#[test]
fn a_fifo_met_at_the_reset_after_a_crash_stops_the_server_instead_of_hanging_it() {
    let cluster = Cluster::start_new("planted_state_file_reset", &[]);
    let mut c = cluster.connect_ext();
    ids(&mut c, "SELECT snowflake_next()");
    Planted::Fifo.plant(&cluster.data().join("pg_snowflake.state"));
    let pid: i32 = c.scalar("SELECT pg_backend_pid()");
    cluster.kill_backend(pid);
    gone(&cluster, Duration::from_secs(30), "the reset after a crash");
    let log = cluster.log();
    assert!(
        log.contains(
            "could not read the snowflake state file \"pg_snowflake.state\": it is a FIFO"
        ),
        "the log lacks the refusal:\n{log}"
    );
}

/// The copy of the mark replaced by each planted thing: the start goes on from the state file,
/// says what the copy is, and the next renewal puts a regular copy back (its temporary file is
/// made afresh, so nothing planted is ever written into).
#[test]
fn a_copy_that_is_not_a_regular_file_is_reported_and_written_again() {
    let cluster = Cluster::start_new("planted_copy", &[]);
    let last =
        *ids(&mut cluster.connect_ext(), "SELECT snowflake_next() FROM generate_series(1, 1000)")
            .last()
            .unwrap();
    let copy = cluster.data().join("pg_snowflake/mark");
    for planted in ALL {
        cluster.stop("fast");
        planted.plant(&copy);
        // And where the copy's temporary file goes: a FIFO there would block its writer.
        Planted::Fifo.plant(&cluster.data().join("pg_snowflake/mark.tmp"));
        let started = Instant::now();
        cluster.start();
        let took = started.elapsed();
        let log = cluster.log();
        let expected =
            format!("Its copy \"pg_snowflake/mark\" is damaged ({}", planted.described());
        assert!(log.contains(&expected), "{planted:?}: the log lacks {expected:?}:\n{log}");
        let mut c = cluster.connect_ext();
        let next = ids(&mut c, "SELECT snowflake_next()")[0];
        assert!(next > last, "{planted:?}: {next} is not above {last}");
        poll(Duration::from_secs(10), Duration::from_millis(20), || {
            let meta = std::fs::symlink_metadata(&copy).map_err(|e| e.to_string())?;
            (meta.file_type().is_file() && meta.len() == 40)
                .then_some(())
                .ok_or(format!("the copy is {meta:?}"))
        });
        eprintln!("{planted:?} in place of the copy: started in {took:?}, the copy written again");
    }
}

/// The registry's lease cache replaced by each planted thing: the member starts at once, says
/// the cache is unreadable and why, and waits for the registry (here unreachable: ids are
/// refused with 55000).
#[test]
fn a_lease_cache_that_is_not_a_regular_file_is_reported_and_ignored() {
    let port = free_port();
    let cluster = Cluster::init(
        "planted_cache",
        &[
            "snowflake.worker_id = -1",
            &format!("snowflake.registry = 'host=127.0.0.1 port={port} connect_timeout=2'"),
        ],
    );
    let cache = cluster.data().join("pg_snowflake.registry");
    for planted in ALL {
        planted.plant(&cache);
        let started = Instant::now();
        cluster.start();
        let took = started.elapsed();
        let log = cluster.log();
        let expected = format!(
            "the cached registry lease pg_snowflake.registry is unreadable ({}",
            planted.described()
        );
        assert!(log.contains(&expected), "{planted:?}: the log lacks {expected:?}:\n{log}");
        let ServerError { code, .. } =
            expect_error(&mut cluster.connect_ext(), "SELECT snowflake_next()");
        assert_eq!(code, "55000", "{planted:?}");
        eprintln!("{planted:?} in place of the lease cache: started in {took:?}");
        cluster.stop("fast");
    }
}

/// The copy's directory itself replaced: by a FIFO (a blocking open of it would hold the
/// postmaster at start, as a FIFO under a file's name did), and by a link to a directory
/// outside the data directory holding a mark a year ahead (followed, it would move every id a
/// year ahead). Neither is opened as the copy: the start goes on from the state file, says what
/// stands there, and the next renewal makes the directory anew.
#[test]
fn a_fifo_or_a_link_in_place_of_the_copys_directory_is_not_followed_at_start() {
    let cluster = Cluster::start_new("planted_copy_dir", &[]);
    let mut c = cluster.connect_ext();
    let before = ids(&mut c, "SELECT snowflake_next()")[0];
    let a_year_from_now: i64 = c.scalar("SELECT snowflake_min_id(now() + interval '1 year')");
    drop(c);
    let copy_dir = cluster.data().join("pg_snowflake");
    let mark = std::fs::read(copy_dir.join("mark")).unwrap();
    let outside = cluster.dir.join("outside");
    for planted in ["fifo", "link"] {
        cluster.stop("fast");
        std::fs::remove_dir_all(&copy_dir).unwrap();
        if planted == "fifo" {
            Planted::Fifo.plant(&copy_dir);
        } else {
            let _ = std::fs::remove_dir_all(&outside);
            std::fs::create_dir(&outside).unwrap();
            std::fs::write(outside.join("mark"), a_year_later(&mark)).unwrap();
            std::os::unix::fs::symlink(&outside, &copy_dir).unwrap();
        }
        let started = Instant::now();
        cluster.start();
        let took = started.elapsed();
        let log = cluster.log();
        let said = if planted == "fifo" {
            "is damaged (pg_snowflake: it is not a directory)"
        } else {
            "is damaged (pg_snowflake: it is a symbolic link, not a directory)"
        };
        assert!(log.contains(said), "{planted}: the log lacks {said:?}:\n{log}");
        let mut c = cluster.connect_ext();
        let next = ids(&mut c, "SELECT snowflake_next()")[0];
        assert!(next > before, "{planted}: {next} is not above {before}");
        assert!(
            next < a_year_from_now / 2 + before / 2,
            "{planted}: {next} comes from the copy outside the data directory"
        );
        poll(Duration::from_secs(10), Duration::from_millis(20), || {
            let meta = std::fs::symlink_metadata(&copy_dir).map_err(|e| e.to_string())?;
            meta.is_dir()
                .then_some(())
                .ok_or(format!("{planted}: the copy's directory is {meta:?}"))
        });
        eprintln!("{planted} in place of the copy's directory: started in {took:?}");
    }
}

/// The mark file `mark` (twitter's 1 ms units) a year later, its checksum made anew: what a
/// link to another directory could bring in. The format is core/src/state_file.rs's: magic (8), time
/// units (8, little endian), layout (16), CRC-32C of those 32 bytes (4), zero (4).
fn a_year_later(mark: &[u8]) -> Vec<u8> {
    assert_eq!(mark.len(), 40, "a mark file of 0.4.0 or later");
    let mut later = mark.to_vec();
    let units = u64::from_le_bytes(later[8..16].try_into().unwrap()) + 365 * 86_400_000;
    later[8..16].copy_from_slice(&units.to_le_bytes());
    let mut crc = !0u32;
    for &byte in &later[..32] {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    later[32..36].copy_from_slice(&(!crc).to_le_bytes());
    later
}
