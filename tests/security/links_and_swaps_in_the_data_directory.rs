//! Attacks on pg_snowflake's files (issue 33) by the operating-system user that owns the data
//! directory: what the server writes through a link, and a swap of `pg_snowflake/` between a
//! check and a use.
//!
//! Majors: 17. What the extension does with its files (core/src/data_file.rs) is the same code on
//! every major. On 17, the server built with assertions.
#![cfg(not(feature = "pg_test"))]

use common::*;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use testkit as common;

fn c_path(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// Makes a FIFO at `p`; something already there is left as it is (false).
fn mkfifo(p: &Path) -> bool {
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::mkfifo(c_path(p).as_ptr(), 0o644) } == 0 {
        return true;
    }
    let e = std::io::Error::last_os_error();
    assert_eq!(e.raw_os_error(), Some(libc::EEXIST), "mkfifo {}: {e}", p.display());
    false
}

fn is_fifo(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_fifo())
}

/// Swaps two names atomically (`renameat2(RENAME_EXCHANGE)`).
fn exchange(a: &Path, b: &Path) -> bool {
    // SAFETY: NUL-terminated paths, relative to no directory fd.
    unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            c_path(a).as_ptr(),
            libc::AT_FDCWD,
            c_path(b).as_ptr(),
            libc::RENAME_EXCHANGE,
        ) == 0
    }
}

/// `pg_snowflake/` is a symbolic link to a directory outside the data directory: every renewal
/// writes the copy of the mark there. The first one removes whatever is called `mark.tmp` there,
/// and every one renames over whatever is called `mark` there (measured: a file `mark` put there
/// after the first renewal was replaced by the 40 bytes of a mark). `data_file` replaces files
/// through a temporary file so that a link planted at a name is replaced, not followed; the
/// directory of the copy is followed all the same.
#[test]
fn a_link_in_place_of_the_copys_directory_writes_nothing_outside_the_data_directory() {
    let m = Cluster::init("links_copy_link", &[]);
    let outside = m.data().join("../outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("mark"), "precious\n").unwrap();
    std::fs::write(outside.join("mark.tmp"), "precious too\n").unwrap();
    chown_to_postgres("-R", &outside);
    // Written in the previous run: a state file, so that the copy found outside is not needed.
    m.start();
    let mut c = m.connect_ext();
    c.query_one("SELECT snowflake_next()", &[]).unwrap();
    drop(c);
    m.stop("fast");
    std::fs::remove_dir_all(m.data().join("pg_snowflake")).unwrap();
    std::os::unix::fs::symlink(&outside, m.data().join("pg_snowflake")).unwrap();
    chown_to_postgres("-h", &m.data().join("pg_snowflake"));
    m.start();
    let mut c = m.connect_ext();
    for _ in 0..3 {
        ids_through_renewals(&mut c, 1);
    }
    drop(c);
    m.stop("fast");
    let mark = std::fs::read(outside.join("mark")).unwrap();
    let tmp = std::fs::read(outside.join("mark.tmp"));
    eprintln!(
        "outside/mark: {} bytes, {:?}; outside/mark.tmp: {:?}",
        mark.len(),
        String::from_utf8_lossy(&mark[..mark.len().min(8)]),
        tmp.as_ref().map(Vec::len)
    );
    assert_eq!(
        (mark.as_slice(), tmp.ok().as_deref()),
        (&b"precious\n"[..], Some(&b"precious too\n"[..])),
        "a renewal wrote through pg_snowflake, a link to a directory outside the data directory"
    );
}

/// The copy's directory is checked (`is_dir`, a rename into it) and then opened again by its
/// name for the sync that makes the rename durable (`data_file::put_in_place`:
/// `File::open(dir)`, blocking, no `O_DIRECTORY`). The owner of the data directory swaps
/// `pg_snowflake/` with a FIFO as fast as it can (`renameat2(RENAME_EXCHANGE)`) while ids are
/// made, and leaves the FIFO in place: the renewing backend blocks in `open()` of the FIFO for
/// good, holding the renewal lock. Measured by hand: every later call that needs a lease times
/// out ("the renewing session has been making the next lease durable ... for 14131 ms"),
/// `pg_terminate_backend()` does nothing, and `pg_ctl stop -m fast` did not end in 20 s (only
/// `-m immediate` or a writer on the FIFO free it).
#[test]
fn a_fifo_swapped_in_for_the_copys_directory_hangs_no_backend() {
    let m = Cluster::start_new("links_copy_fifo", &[]);
    let mut c = m.connect_ext();
    c.query_one("SELECT snowflake_next()", &[]).unwrap();
    let dir = m.data().join("pg_snowflake");
    let fifo = m.data().join("pg_snowflake_fifo");
    assert!(mkfifo(&fifo));
    let stop = AtomicBool::new(false);
    let (in_open, stopped, took) = std::thread::scope(|s| {
        // The workers loop until `stop`: a panic here must stop them (see StopOnDrop).
        let _stop = StopOnDrop(&stop);
        for _ in 0..2 {
            let stop = &stop;
            let mut c = m.connect();
            c.batch_execute("SET statement_timeout = '5s'").unwrap();
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = c.query_one(
                        "SELECT count(snowflake_next()) FROM generate_series(1, 3000000)",
                        &[],
                    );
                }
            });
        }
        let until = Instant::now() + Duration::from_secs(10);
        let (mut swaps, mut remade) = (0u64, 0u64);
        while Instant::now() < until {
            if exchange(&dir, &fifo) {
                swaps += 1;
                continue;
            }
            // A renewal that finds the FIFO at pg_snowflake removes it and makes the directory
            // again (`Dir::open_or_make`): between the two, one name is missing and the swap
            // fails (ENOENT). Make the FIFO again. (This test once hung CI for 1,200 s: a panic
            // here, with the writers looping until `stop`, is the one way it could; not seen in
            // 9 runs here, 4 of them beside three busy loops.)
            let e = std::io::Error::last_os_error();
            assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "renameat2: {e}");
            for p in [&dir, &fifo] {
                if std::fs::symlink_metadata(p).is_err() && mkfifo(p) {
                    remade += 1;
                }
            }
        }
        // Leave a FIFO where the directory was.
        if !is_fifo(&dir) && !(is_fifo(&fifo) && exchange(&dir, &fifo)) {
            let _ = std::fs::remove_dir_all(&dir);
            mkfifo(&dir);
        }
        eprintln!(
            "{swaps} swaps, {remade} FIFOs made again after the server removed one; \
             pg_snowflake is a FIFO: {}",
            is_fifo(&dir)
        );
        stop.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs(6));
        let stuck: Vec<(i32, String)> = c
            .query(
                "SELECT pid, left(query, 60) FROM pg_stat_activity
                  WHERE state = 'active' AND pid <> pg_backend_pid()
                    AND now() - query_start > interval '5 s'",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let in_open: Vec<i32> = stuck
            .iter()
            .map(|(pid, _)| *pid)
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/wchan"))
                    .is_ok_and(|w| w.contains("wait_for_partner") || w.contains("fifo"))
            })
            .collect();
        eprintln!("backends active for over 5 s: {stuck:?}; blocked opening a FIFO: {in_open:?}");
        let t = Instant::now();
        let stopped = std::process::Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(m.bin("pg_ctl"))
            .args(["stop", "-w", "-t", "10", "-m", "fast", "-D"])
            .arg(m.data())
            .output()
            .unwrap()
            .status
            .success();
        let took = t.elapsed();
        eprintln!("pg_ctl stop -m fast: stopped {stopped} after {took:?}");
        // The clients of backends that hang get an answer only once they are gone.
        m.stop_if_running();
        (in_open, stopped, took)
    });
    assert!(
        in_open.is_empty() && stopped,
        "backends {in_open:?} hang in open() of the FIFO swapped in for pg_snowflake/, and \
         pg_ctl stop -m fast {} after {took:?}",
        if stopped { "stopped" } else { "did not stop" }
    );
}
