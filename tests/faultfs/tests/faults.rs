//! Faults on command: the control socket makes chosen operations fail; a failed write
//! changes nothing and a failed fsync makes nothing durable.

mod common;

use std::fs::{self, File};
use std::io::{ErrorKind, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use common::*;

fn errno(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or_else(|| panic!("not an OS error: {e}"))
}

#[test]
fn write_fault_fails_the_next_write_and_leaves_the_data() {
    let f = Faultfs::new("f-write");
    write_durable(&f.path("f"), b"hello");
    assert_eq!(f.ctl("fail write f* ENOSPC 1"), "ok 1");
    let file = File::options().write(true).open(f.path("f")).unwrap();
    assert_eq!(errno(file.write_at(b"XXXXX", 0).unwrap_err()), libc::ENOSPC);
    assert_eq!(read(&f.path("f")), b"hello", "a failed write must not change the data");
    // The rule was for one write only.
    file.write_all_at(b"HE", 0).unwrap();
    assert_eq!(read(&f.path("f")), b"HEllo");
    assert_eq!(f.stat("faults"), 1);
    assert_eq!(f.ctl("rules"), "ok 1 1:write:f*:ENOSPC:0:1");
}

#[test]
fn fsync_fault_makes_nothing_durable() {
    let mut f = Faultfs::new("f-fsync");
    write_durable(&f.path("f"), b"old");
    let fsyncs = f.stat("fsyncs");
    assert!(f.ctl("fail fsync f EIO").starts_with("ok "));
    fs::write(f.path("f"), b"new").unwrap();
    let file = File::open(f.path("f")).unwrap();
    assert_eq!(errno(file.sync_all().unwrap_err()), libc::EIO);
    assert_eq!(errno(file.sync_data().unwrap_err()), libc::EIO, "the rule lasts until cleared");
    drop(file);
    assert_eq!(f.stat("fsyncs"), fsyncs, "failed fsyncs are not counted as fsyncs");
    assert_eq!(f.stat("faults"), 2);
    assert_eq!(read(&f.path("f")), b"new", "the volatile data is still there");
    f.power_cut();
    assert_eq!(read(&f.path("f")), b"old", "nothing became durable");
    // After `clear` the same fsync succeeds.
    fs::write(f.path("f"), b"new").unwrap();
    assert!(f.ctl("fail fsync f EIO").starts_with("ok "));
    assert_eq!(errno(File::open(f.path("f")).unwrap().sync_all().unwrap_err()), libc::EIO);
    assert_eq!(f.ctl("clear"), "ok");
    assert_eq!(f.ctl("rules"), "ok 0");
    fsync_file(&f.path("f"));
    f.power_cut();
    assert_eq!(read(&f.path("f")), b"new");
}

#[test]
fn fsyncdir_fault_keeps_the_old_names() {
    let mut f = Faultfs::new("f-fsyncdir");
    write_durable(&f.path("f"), b"old");
    fs::write(f.path("f.tmp"), b"new").unwrap();
    fsync_file(&f.path("f.tmp"));
    fs::rename(f.path("f.tmp"), f.path("f")).unwrap();
    assert!(f.ctl("fail fsyncdir . EIO 1").starts_with("ok "));
    assert_eq!(errno(File::open(f.path("")).unwrap().sync_all().unwrap_err()), libc::EIO);
    f.power_cut();
    assert_eq!(read(&f.path("f")), b"old");
}

#[test]
fn globs_select_paths() {
    let f = Faultfs::new("f-glob");
    fs::create_dir(f.path("pg_wal")).unwrap();
    fs::create_dir(f.path("base")).unwrap();
    assert!(f.ctl("fail write pg_wal/* EIO").starts_with("ok "));
    assert_eq!(
        errno(fs::write(f.path("pg_wal/000000010000000000000001"), b"x").unwrap_err()),
        libc::EIO
    );
    fs::write(f.path("base/1"), b"x").unwrap();
    fs::write(f.path("pg_wal.txt"), b"x").unwrap();
    assert!(f.ctl("fail write pg_snowflake.state* EDQUOT").starts_with("ok "));
    assert_eq!(errno(fs::write(f.path("pg_snowflake.state.tmp"), b"x").unwrap_err()), libc::EDQUOT);
    assert_eq!(errno(fs::write(f.path("pg_snowflake.state"), b"x").unwrap_err()), libc::EDQUOT);
    fs::write(f.path("pg_snowflake.other"), b"x").unwrap();
    // A hard link is matched by any of its names.
    fs::hard_link(f.path("base/1"), f.path("pg_wal/linked")).unwrap();
    assert_eq!(errno(fs::write(f.path("base/1"), b"y").unwrap_err()), libc::EIO);
    assert_eq!(f.stat("faults"), 4);
}

#[test]
fn create_rename_open_read_truncate_fallocate_and_unlink_faults() {
    let f = Faultfs::new("f-ops");
    fs::write(f.path("f"), b"0123456789").unwrap();
    fs::write(f.path("x.tmp"), b"tmp").unwrap();

    assert!(f.ctl("fail create new* EDQUOT").starts_with("ok "));
    assert_eq!(errno(File::create(f.path("new1")).unwrap_err()), libc::EDQUOT);
    assert_eq!(errno(fs::create_dir(f.path("newdir")).unwrap_err()), libc::EDQUOT);
    assert_eq!(
        errno(std::os::unix::fs::symlink("f", f.path("newlink")).unwrap_err()),
        libc::EDQUOT
    );
    assert_eq!(errno(fs::hard_link(f.path("f"), f.path("newhard")).unwrap_err()), libc::EDQUOT);
    assert!(!f.path("new1").exists() && !f.path("newdir").exists());
    File::create(f.path("other")).unwrap();

    assert!(f.ctl("fail rename *.tmp EROFS").starts_with("ok "));
    assert_eq!(errno(fs::rename(f.path("x.tmp"), f.path("x")).unwrap_err()), libc::EROFS);
    assert_eq!(
        errno(fs::rename(f.path("other"), f.path("y.tmp")).unwrap_err()),
        libc::EROFS,
        "the destination matches too"
    );
    assert_eq!(read(&f.path("x.tmp")), b"tmp");

    assert!(f.ctl("fail open f EIO 1").starts_with("ok "));
    assert_eq!(errno(File::open(f.path("f")).unwrap_err()), libc::EIO);

    // Counts are of FUSE requests: the kernel retries a failed readahead with a plain
    // read, so a one-shot rule would be absorbed by the retry. Use a lasting rule.
    let read_rule = f.ctl("fail read f EIO");
    let mut buf = Vec::new();
    assert_eq!(
        errno(File::open(f.path("f")).unwrap().read_to_end(&mut buf).unwrap_err()),
        libc::EIO
    );
    assert_eq!(f.ctl("clear"), "ok");
    assert_eq!(read(&f.path("f")), b"0123456789", "{read_rule}: reads work again after clear");

    assert!(f.ctl("fail truncate f ENOSPC").starts_with("ok "));
    let file = File::options().write(true).open(f.path("f")).unwrap();
    assert_eq!(errno(file.set_len(3).unwrap_err()), libc::ENOSPC);
    assert_eq!(
        errno(File::create(f.path("f")).unwrap_err()),
        libc::ENOSPC,
        "open with O_TRUNC truncates"
    );
    assert_eq!(fs::metadata(f.path("f")).unwrap().len(), 10);

    assert!(f.ctl("fail fallocate f ENOSPC").starts_with("ok "));
    // SAFETY: a valid descriptor.
    assert_eq!(unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, 1 << 20) }, libc::ENOSPC);
    assert_eq!(fs::metadata(f.path("f")).unwrap().len(), 10);

    assert!(f.ctl("fail unlink x* EACCES").starts_with("ok "));
    assert_eq!(fs::remove_file(f.path("x.tmp")).unwrap_err().kind(), ErrorKind::PermissionDenied);

    assert_eq!(f.ctl("clear"), "ok");
    file.set_len(3).unwrap();
    let faults = f.stat("faults");
    fs::rename(f.path("x.tmp"), f.path("x")).unwrap();
    File::create(f.path("new1")).unwrap();
    assert_eq!(read(&f.path("f")), b"012");
    assert!(faults >= 12, "at least one fault per failed call above: {faults}");
}

#[test]
fn control_protocol() {
    let mut f = Faultfs::new("f-proto");
    assert_eq!(f.ctl("ping"), "ok");
    assert!(f.ctl("fail scribble f EIO").starts_with("error unknown op"));
    assert!(f.ctl("fail write f EWHAT").starts_with("error unknown errno"));
    assert!(f.ctl("fail write f EIO 0").starts_with("error bad count"));
    assert!(f.ctl("fail write f").starts_with("error usage"));
    assert!(f.ctl("launch").starts_with("error unknown command"));
    assert_eq!(f.ctl("fail write a 5 3"), "ok 1", "errnos by number");
    assert_eq!(f.ctl("fail fsync * EIO"), "ok 2");
    assert_eq!(f.ctl("rules"), "ok 2 1:write:a:EIO:3:0 2:fsync:*:EIO:-:0");
    assert_eq!(f.ctl("clear"), "ok");
    // Counters move.
    fs::write(f.path("f"), vec![1u8; 10_000]).unwrap();
    assert_eq!(f.stat("bytes_written"), 10_000);
    assert!(f.stat("writes") >= 1);
    assert!(f.stat("dirty_bytes") >= 10_000);
    fsync_file(&f.path("f"));
    fsync_dir(&f.mnt);
    assert_eq!((f.stat("fsyncs"), f.stat("fsyncdirs"), f.stat("bytes_durable")), (1, 1, 10_000));
    // `sync` makes everything durable, as sync(2) on a real disk.
    fs::create_dir(f.path("d")).unwrap();
    fs::write(f.path("d/g"), b"g").unwrap();
    assert_eq!(f.ctl("sync"), "ok 1");
    f.power_cut();
    assert_eq!(read(&f.path("d/g")), b"g");
    assert_eq!(f.stat("fsyncs"), 0, "counters start again with the new daemon");
}

#[test]
fn a_held_fsync_waits_until_released_while_other_requests_go_on() {
    let mut f = Faultfs::with_options("hold", &["--threads", "2"]);
    write_durable(&f.path("f"), b"old");
    assert_eq!(f.ctl("hold fsync f"), "ok");
    fs::write(f.path("f"), b"new").unwrap();
    let path = f.path("f");
    let syncer = std::thread::spawn(move || File::open(path).unwrap().sync_all());
    // The fsync waits in faultfs...
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while f.ctl("holds") != "ok 1 1" {
        assert!(std::time::Instant::now() < deadline, "the fsync was not held");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // ... while other requests are served.
    write_durable(&f.path("g"), b"other");
    assert_eq!(read(&f.path("g")), b"other");
    assert!(!syncer.is_finished());
    // A power cut now: the held fsync never made "new" durable.
    f.power_cut();
    assert_eq!(read(&f.path("f")), b"old");
    assert_eq!(read(&f.path("g")), b"other");
    let _ = syncer.join();
    // Released, a held fsync completes.
    assert_eq!(f.ctl("hold fsync f 1"), "ok");
    fs::write(f.path("f"), b"new").unwrap();
    let path = f.path("f");
    let syncer = std::thread::spawn(move || File::open(path).unwrap().sync_all());
    while f.ctl("holds") != "ok 1 1" {
        assert!(std::time::Instant::now() < deadline, "the fsync was not held");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(f.ctl("release"), "ok");
    syncer.join().unwrap().unwrap();
    assert_eq!(f.ctl("holds"), "ok 0 1");
    f.power_cut();
    assert_eq!(read(&f.path("f")), b"new");
}
