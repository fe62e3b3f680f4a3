//! The durability model, case by case, through the kernel: what survives a power cut.

mod common;

use std::fs::{self, File};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};

use common::*;

#[test]
fn unsynced_new_file_is_lost() {
    let mut f = Faultfs::new("unsynced");
    fs::write(f.path("f"), b"data").unwrap();
    assert_eq!(read(&f.path("f")), b"data", "visible before the cut");
    f.power_cut();
    assert!(!f.path("f").exists(), "a file never fsynced must not survive");
}

#[test]
fn file_fsync_without_dir_fsync_is_lost() {
    let mut f = Faultfs::new("nodirsync");
    fs::write(f.path("f"), b"data").unwrap();
    fsync_file(&f.path("f"));
    assert_eq!(f.stat("fsyncs"), 1);
    f.power_cut();
    assert!(!f.path("f").exists(), "its name was never made durable");
}

#[test]
fn file_and_dir_fsync_survive() {
    let mut f = Faultfs::new("both");
    fs::write(f.path("f"), b"data").unwrap();
    fsync_file(&f.path("f"));
    fsync_dir(&f.mnt);
    f.power_cut();
    assert_eq!(read(&f.path("f")), b"data");
    // The other order works too: the name first, then the data.
    fs::write(f.path("g"), b"more").unwrap();
    fsync_dir(&f.mnt);
    fdatasync_file(&f.path("g"));
    f.power_cut();
    assert_eq!(read(&f.path("g")), b"more");
}

#[test]
fn durable_name_without_data_fsync_is_an_empty_file() {
    let mut f = Faultfs::new("emptyname");
    fs::write(f.path("f"), b"data").unwrap();
    fsync_dir(&f.mnt);
    f.power_cut();
    assert_eq!(read(&f.path("f")), b"", "the name is durable, the data is not");
}

#[test]
fn overwrite_after_fsync_returns_old_data() {
    let mut f = Faultfs::new("overwrite");
    write_durable(&f.path("f"), b"old data");
    let file = File::options().write(true).open(f.path("f")).unwrap();
    file.write_all_at(b"NEW", 0).unwrap();
    file.write_all_at(b"appended", 8).unwrap();
    drop(file);
    assert_eq!(read(&f.path("f")), b"NEW dataappended");
    f.power_cut();
    assert_eq!(read(&f.path("f")), b"old data");
    // A second fsync makes the overwrite durable.
    File::options().write(true).open(f.path("f")).unwrap().write_all_at(b"NEW", 0).unwrap();
    fsync_file(&f.path("f"));
    f.power_cut();
    assert_eq!(read(&f.path("f")), b"NEW data");
}

#[test]
fn truncate_without_fsync_returns_old_size() {
    let mut f = Faultfs::new("truncate");
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    write_durable(&f.path("f"), &data);
    let file = File::options().write(true).open(f.path("f")).unwrap();
    file.set_len(100).unwrap();
    // Growing again shows zeros, not the cut-away durable bytes.
    file.set_len(5000).unwrap();
    drop(file);
    let now = read(&f.path("f"));
    assert_eq!(&now[..100], &data[..100]);
    assert!(now[100..].iter().all(|&b| b == 0), "bytes cut by truncate must read as zeros");
    f.power_cut();
    assert_eq!(read(&f.path("f")), data, "the old size and data return");
    // Truncate and fsync: the cut is durable, and the gap stays zeros.
    let file = File::options().write(true).open(f.path("f")).unwrap();
    file.set_len(100).unwrap();
    file.write_all_at(b"end", 4997).unwrap();
    file.sync_all().unwrap();
    drop(file);
    f.power_cut();
    let after = read(&f.path("f"));
    assert_eq!(after.len(), 5000);
    assert_eq!(&after[..100], &data[..100]);
    assert!(after[100..4997].iter().all(|&b| b == 0));
    assert_eq!(&after[4997..], b"end");
}

#[test]
fn atomic_replace_with_dir_fsync_survives() {
    let mut f = Faultfs::new("replace-ok");
    write_durable(&f.path("f"), b"old");
    fs::write(f.path("f.tmp"), b"new").unwrap();
    fsync_file(&f.path("f.tmp"));
    fs::rename(f.path("f.tmp"), f.path("f")).unwrap();
    fsync_dir(&f.mnt);
    f.power_cut();
    assert_eq!(read(&f.path("f")), b"new");
    assert!(!f.path("f.tmp").exists());
}

#[test]
fn atomic_replace_without_dir_fsync_returns_old_file() {
    let mut f = Faultfs::new("replace-lost");
    write_durable(&f.path("f"), b"old");
    fs::write(f.path("f.tmp"), b"new").unwrap();
    fsync_file(&f.path("f.tmp"));
    fs::rename(f.path("f.tmp"), f.path("f")).unwrap();
    assert_eq!(read(&f.path("f")), b"new");
    f.power_cut();
    assert_eq!(read(&f.path("f")), b"old", "the rename was not durable: the old f returns");
    assert!(!f.path("f.tmp").exists(), "f.tmp's name was never durable either");
}

#[test]
fn rename_without_dir_fsync_leaves_the_source() {
    let mut f = Faultfs::new("rename-src");
    write_durable(&f.path("a"), b"A");
    fs::rename(f.path("a"), f.path("b")).unwrap();
    f.power_cut();
    assert_eq!(read(&f.path("a")), b"A");
    assert!(!f.path("b").exists());
}

#[test]
fn unlink_is_durable_only_with_dir_fsync() {
    let mut f = Faultfs::new("unlink");
    write_durable(&f.path("a"), b"A");
    write_durable(&f.path("b"), b"B");
    fs::remove_file(f.path("a")).unwrap();
    fs::remove_file(f.path("b")).unwrap();
    f.power_cut();
    assert_eq!(read(&f.path("a")), b"A", "an unlink without dir fsync is undone");
    fs::remove_file(f.path("a")).unwrap();
    fsync_dir(&f.mnt);
    f.power_cut();
    assert!(!f.path("a").exists());
    assert_eq!(read(&f.path("b")), b"B");
    // The data file of a durably removed inode is collected.
    let files = fs::read_dir(f.backing.join("inodes")).unwrap().count();
    assert_eq!(files, 1, "only b's data remains in the store");
}

#[test]
fn new_directories_need_their_parent_fsynced() {
    let mut f = Faultfs::new("mkdir");
    fs::create_dir(f.path("d")).unwrap();
    write_durable(&f.path("d/x"), b"x"); // fsyncs d, not the root
    f.power_cut();
    assert!(!f.path("d").exists(), "d's own entry in the root was never fsynced");
    fs::create_dir(f.path("d")).unwrap();
    fs::create_dir(f.path("d/e")).unwrap();
    write_durable(&f.path("d/e/y"), b"y");
    fsync_dir(&f.path("d"));
    fsync_dir(&f.mnt);
    f.power_cut();
    assert_eq!(read(&f.path("d/e/y")), b"y");
    // rmdir needs the parent fsynced too.
    fs::remove_file(f.path("d/e/y")).unwrap();
    fs::remove_dir(f.path("d/e")).unwrap();
    f.power_cut();
    assert_eq!(read(&f.path("d/e/y")), b"y", "neither the unlink nor the rmdir was durable");
    fs::remove_file(f.path("d/e/y")).unwrap();
    fs::remove_dir(f.path("d/e")).unwrap();
    fsync_dir(&f.path("d"));
    f.power_cut();
    assert!(!f.path("d/e").exists());
}

#[test]
fn rename_across_directories_follows_each_directory_fsync() {
    let mut f = Faultfs::new("xdir");
    fs::create_dir(f.path("a")).unwrap();
    fs::create_dir(f.path("b")).unwrap();
    fsync_dir(&f.mnt);
    write_durable(&f.path("a/f"), b"F");
    fs::rename(f.path("a/f"), f.path("b/f")).unwrap();
    fsync_dir(&f.path("b"));
    f.power_cut();
    // The arrival is durable, the departure is not: two names for one inode.
    assert_eq!(read(&f.path("a/f")), b"F");
    assert_eq!(read(&f.path("b/f")), b"F");
    let (ma, mb) = (fs::metadata(f.path("a/f")).unwrap(), fs::metadata(f.path("b/f")).unwrap());
    assert_eq!(ma.ino(), mb.ino());
    assert_eq!(ma.nlink(), 2);
    fs::remove_file(f.path("a/f")).unwrap();
    fsync_dir(&f.path("a"));
    f.power_cut();
    assert!(!f.path("a/f").exists());
    assert_eq!(fs::metadata(f.path("b/f")).unwrap().nlink(), 1);
}

#[test]
fn renamed_directory_has_one_durable_name() {
    let mut f = Faultfs::new("dirmove");
    fs::create_dir_all(f.path("a/d")).unwrap();
    fs::create_dir(f.path("b")).unwrap();
    fsync_dir(&f.path("a"));
    fsync_dir(&f.mnt);
    write_durable(&f.path("a/d/x"), b"x");
    fs::rename(f.path("a/d"), f.path("b/d")).unwrap();
    fsync_dir(&f.path("b"));
    f.power_cut();
    assert!(!f.path("a/d").exists(), "a directory's new durable name replaces its old one");
    assert_eq!(read(&f.path("b/d/x")), b"x");
}

#[test]
fn hard_links_and_symlinks() {
    let mut f = Faultfs::new("links");
    write_durable(&f.path("f"), b"F");
    fs::hard_link(f.path("f"), f.path("g")).unwrap();
    std::os::unix::fs::symlink("f", f.path("l")).unwrap();
    assert_eq!(fs::metadata(f.path("f")).unwrap().nlink(), 2);
    assert_eq!(fs::metadata(f.path("f")).unwrap().ino(), fs::metadata(f.path("g")).unwrap().ino());
    f.power_cut();
    assert!(!f.path("g").exists() && fs::symlink_metadata(f.path("l")).is_err());
    assert_eq!(fs::metadata(f.path("f")).unwrap().nlink(), 1);
    fs::hard_link(f.path("f"), f.path("g")).unwrap();
    std::os::unix::fs::symlink("f", f.path("l")).unwrap();
    fsync_dir(&f.mnt);
    f.power_cut();
    assert_eq!(fs::metadata(f.path("g")).unwrap().nlink(), 2);
    assert_eq!(fs::read_link(f.path("l")).unwrap().to_str(), Some("f"));
    assert_eq!(read(&f.path("l")), b"F");
    // A write through one name shows through the other; fsync of either makes it durable.
    File::options().write(true).open(f.path("g")).unwrap().write_all_at(b"G", 0).unwrap();
    assert_eq!(read(&f.path("f")), b"G");
    fsync_file(&f.path("g"));
    f.power_cut();
    assert_eq!(read(&f.path("f")), b"G");
}

#[test]
fn directory_nlink_counts_subdirectories() {
    let f = Faultfs::new("nlink");
    fs::create_dir(f.path("a")).unwrap();
    fs::create_dir(f.path("a/b")).unwrap();
    fs::create_dir(f.path("a/c")).unwrap();
    fs::write(f.path("a/file"), b"").unwrap();
    assert_eq!(fs::metadata(f.path("a")).unwrap().nlink(), 4);
    assert_eq!(fs::metadata(f.path("")).unwrap().nlink(), 3);
    fs::rename(f.path("a/c"), f.path("c")).unwrap();
    assert_eq!(fs::metadata(f.path("a")).unwrap().nlink(), 3);
    assert_eq!(fs::metadata(f.path("")).unwrap().nlink(), 4);
}

#[test]
fn metadata_changes_are_durable_at_once() {
    let mut f = Faultfs::new("chmod");
    write_durable(&f.path("f"), b"F");
    fs::set_permissions(f.path("f"), fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(f.path("f"), Some(123), Some(456)).unwrap();
    f.power_cut();
    let m = fs::metadata(f.path("f")).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o600);
    assert_eq!((m.uid(), m.gid()), (123, 456));
}

#[test]
fn rename_noreplace() {
    let f = Faultfs::new("noreplace");
    fs::write(f.path("a"), b"A").unwrap();
    fs::write(f.path("b"), b"B").unwrap();
    let c = |p: &std::path::Path| std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    let (a, b, n) = (c(&f.path("a")), c(&f.path("b")), c(&f.path("new")));
    // SAFETY: valid C strings.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    assert_eq!(r, -1);
    assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EEXIST));
    // SAFETY: as above.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            n.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    assert_eq!(r, 0);
    assert_eq!(read(&f.path("new")), b"A");
}

#[test]
fn o_dsync_writes_and_fallocate() {
    let mut f = Faultfs::new("dsync");
    fs::write(f.path("f"), b"").unwrap();
    fsync_dir(&f.mnt);
    // An O_DSYNC write is durable when it returns: the kernel follows it with an fsync.
    let mut file =
        File::options().write(true).custom_flags(libc::O_DSYNC).open(f.path("f")).unwrap();
    file.write_all(b"synced").unwrap();
    drop(file);
    // posix_fallocate (PostgreSQL uses it for WAL segments) grows the file with zeros.
    let file = File::create(f.path("g")).unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: a valid descriptor.
    assert_eq!(unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, 1 << 20) }, 0);
    assert_eq!(file.metadata().unwrap().len(), 1 << 20);
    file.sync_all().unwrap();
    drop(file);
    fsync_dir(&f.mnt);
    f.power_cut();
    assert_eq!(read(&f.path("f")), b"synced");
    let g = read(&f.path("g"));
    assert_eq!(g.len(), 1 << 20);
    assert!(g.iter().all(|&b| b == 0));
}

#[test]
fn large_files_keep_only_unsynced_pages_in_memory() {
    let mut f = Faultfs::new("large");
    let mut rng = Rng(7);
    let data = rng.bytes(3 << 20);
    let mut file = File::create(f.path("big")).unwrap();
    for chunk in data.chunks(100_003) {
        file.write_all(chunk).unwrap();
    }
    assert!(f.stat("dirty_bytes") >= 3 << 20);
    file.sync_all().unwrap();
    assert_eq!(f.stat("dirty_bytes"), 0, "fsync moves the data to the store");
    assert_eq!(f.stat("bytes_durable"), 3 << 20);
    // A WAL-like 16 MiB of zeros past the end costs no memory.
    file.seek(SeekFrom::End(0)).unwrap();
    file.write_all(&vec![0u8; 16 << 20]).unwrap();
    assert!(f.stat("dirty_bytes") <= 4096, "zero pages past the durable data are not stored");
    // Scattered overwrites.
    let mut expect = data.clone();
    expect.resize((3 << 20) + (16 << 20), 0);
    for _ in 0..50 {
        let off = rng.below(expect.len() as u64 - 10_000) as usize;
        let len = rng.below(9_000) as usize + 1;
        let patch = rng.bytes(len);
        file.write_all_at(&patch, off as u64).unwrap();
        expect[off..off + patch.len()].copy_from_slice(&patch);
    }
    drop(file);
    assert!(read(&f.path("big")) == expect, "volatile view");
    fsync_dir(&f.mnt);
    f.power_cut();
    assert!(read(&f.path("big")) == data, "only the first fsync's data is durable");
}

#[test]
fn unlinked_open_file_keeps_its_data() {
    let f = Faultfs::new("orphan");
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(f.path("f"))
        .unwrap();
    file.write_all(b"still here").unwrap();
    fs::remove_file(f.path("f")).unwrap();
    let mut buf = [0u8; 10];
    file.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"still here");
    assert_eq!(file.metadata().unwrap().nlink(), 0);
    file.sync_all().unwrap();
}

#[test]
fn listing_while_removing_returns_every_remaining_entry_once() {
    let f = Faultfs::new("readdir");
    for i in 0..300 {
        fs::write(f.path(&format!("f{i:03}")), b"").unwrap();
    }
    let mut seen = Vec::new();
    for (n, e) in fs::read_dir(f.path("")).unwrap().enumerate() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if n == 0 {
            // Remove entries that sort before and after the reader's position.
            for i in (0..300).step_by(2) {
                let _ = fs::remove_file(f.path(&format!("f{i:03}")));
            }
        }
        seen.push(name);
    }
    seen.sort();
    let mut dedup = seen.clone();
    dedup.dedup();
    assert_eq!(seen, dedup, "no entry twice");
    for i in (1..300).step_by(2) {
        assert!(seen.contains(&format!("f{i:03}")), "f{i:03} was never removed and must be listed");
    }
}

#[test]
fn sigterm_unmounts_and_exits() {
    let mut f = Faultfs::new("sigterm");
    write_durable(&f.path("f"), b"F");
    fs::write(f.path("g"), b"G").unwrap();
    let status = f.stop();
    assert!(status.success(), "exit status {status}");
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(f.mnt.to_str().unwrap()), "still mounted after SIGTERM");
    f.start();
    assert_eq!(read(&f.path("f")), b"F");
    assert!(!f.path("g").exists(), "a clean stop makes nothing durable either");
}

#[test]
fn import_preserves_tree_modes_owners_and_links() {
    let src = TempDir::new("import-src");
    let s = |p: &str| src.0.join(p);
    fs::create_dir(s("data")).unwrap();
    fs::create_dir(s("data/sub")).unwrap();
    fs::write(s("data/sub/file"), b"content").unwrap();
    fs::hard_link(s("data/sub/file"), s("data/hard")).unwrap();
    std::os::unix::fs::symlink("sub/file", s("data/link")).unwrap();
    fs::set_permissions(s("data"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(s("data/sub/file"), fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(s("data"), Some(70), Some(71)).unwrap();
    std::os::unix::fs::chown(s("data/sub/file"), Some(72), Some(73)).unwrap();
    let mut f = Faultfs::import("import", &s("data"), &[]);
    for _ in 0..2 {
        let root = fs::metadata(f.path("")).unwrap();
        assert_eq!((root.mode() & 0o7777, root.uid(), root.gid()), (0o700, 70, 71));
        let file = fs::metadata(f.path("sub/file")).unwrap();
        assert_eq!(
            (file.mode() & 0o7777, file.uid(), file.gid(), file.nlink()),
            (0o640, 72, 73, 2)
        );
        assert_eq!(file.ino(), fs::metadata(f.path("hard")).unwrap().ino());
        assert_eq!(read(&f.path("link")), b"content");
        assert_eq!(
            file.mtime(),
            fs::metadata(s("data/sub/file")).unwrap().mtime(),
            "times are imported"
        );
        f.power_cut(); // the imported state is durable
    }
}

#[test]
fn journal_mode_commits_every_pending_name_at_any_fsync() {
    let mut f = Faultfs::with_options("journal", &["--journal"]);
    fs::create_dir(f.path("d")).unwrap();
    write_durable(&f.path("base"), b"B");
    // New names anywhere, a rename and an unlink, then the fsync of one unrelated file.
    fs::write(f.path("d/new"), b"never fsynced").unwrap();
    fs::write(f.path("old"), b"O").unwrap();
    fs::write(f.path("gone"), b"G").unwrap();
    fsync_file(&f.path("base"));
    fs::rename(f.path("old"), f.path("renamed")).unwrap();
    fs::remove_file(f.path("gone")).unwrap();
    fs::write(f.path("x"), b"X").unwrap();
    fsync_file(&f.path("x"));
    // Not committed: changes after the last fsync.
    fs::write(f.path("late"), b"L").unwrap();
    f.power_cut();
    assert_eq!(read(&f.path("d/new")), b"", "the name is durable, its data never was");
    assert_eq!(read(&f.path("renamed")), b"", "renamed before a commit, data never fsynced");
    assert!(!f.path("old").exists() && !f.path("gone").exists());
    assert_eq!(read(&f.path("x")), b"X");
    assert!(!f.path("late").exists());
    // Unsynced data is still lost in journal mode.
    File::options().write(true).open(f.path("x")).unwrap().write_all_at(b"Y", 0).unwrap();
    f.power_cut();
    assert_eq!(read(&f.path("x")), b"X");
}

#[test]
fn a_strict_directory_is_not_carried_by_another_files_journal_commit() {
    // The atomic-replace pattern in a strict directory, in journal mode: a rename there is
    // durable only once that directory itself is fsynced, whatever else is fsynced meanwhile.
    let mut f = Faultfs::with_options("strict_dir", &["--journal", "--strict-dir", "s"]);
    fs::create_dir(f.path("s")).unwrap();
    fs::create_dir(f.path("other")).unwrap();
    fsync_dir(&f.path(""));
    write_durable(&f.path("s/f"), b"old");
    fsync_dir(&f.path("s"));
    write_durable(&f.path("s/f.tmp"), b"new");
    fs::rename(f.path("s/f.tmp"), f.path("s/f")).unwrap();
    // Another program's fsync: a journal commit, which carries changes elsewhere only.
    fs::write(f.path("g"), b"G").unwrap();
    fs::write(f.path("other/h"), b"H").unwrap();
    fsync_file(&f.path("other/h"));
    f.power_cut();
    assert_eq!(read(&f.path("s/f")), b"old", "the rename in s was carried");
    assert!(
        f.path("g").exists() && f.path("other/h").exists(),
        "other directories are still journaled"
    );
    // With the fsync of s, the rename is durable.
    write_durable(&f.path("s/f.tmp"), b"new");
    fs::rename(f.path("s/f.tmp"), f.path("s/f")).unwrap();
    fsync_dir(&f.path("s"));
    f.power_cut();
    assert_eq!(read(&f.path("s/f")), b"new");
    assert!(!f.path("s/f.tmp").exists());
}
