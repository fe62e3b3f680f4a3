//! Test harness: runs the real `faultfs` binary on a temporary backing store, mounts it as
//! root, and cuts the power (SIGKILL, lazy unmount, restart on the same store).
//!
//! Nothing is skipped: without root or FUSE the tests fail with a message saying so.

#![allow(dead_code, unused_imports)] // each test binary uses a different part of the harness

use std::ffi::CString;
use std::fs::{self, File};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_faultfs");

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A fresh directory under /tmp (short paths: PostgreSQL's socket paths must stay short),
/// removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let p = PathBuf::from(format!("/tmp/ffs-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir(&p).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub fn require_root() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        panic!("the faultfs tests mount FUSE file systems and must run as root (they do not skip)");
    }
}

/// Lazily unmounts `path` if something is mounted there.
pub fn detach(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid C string; failure (nothing mounted) is fine.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
}

#[path = "../../daemon.rs"]
mod daemon;
pub use daemon::Daemon;

/// One faultfs daemon serving one backing store at one mount point, in a directory of its own.
pub struct Faultfs {
    pub dir: TempDir,
    pub backing: PathBuf,
    pub mnt: PathBuf,
    daemon: Daemon,
    pub starts: u32,
}

impl Faultfs {
    fn layout(tag: &str, options: &[&str]) -> Faultfs {
        require_root();
        let dir = TempDir::new(tag);
        let (backing, mnt) = (dir.0.join("backing"), dir.0.join("mnt"));
        fs::create_dir(&mnt).unwrap();
        let (sock, log) = (dir.0.join("ctl"), dir.0.join("faultfs.log"));
        let mut daemon = Daemon::new(Path::new(BIN), backing.clone(), mnt.clone(), sock, log);
        daemon.options = options.iter().map(|s| s.to_string()).collect();
        Faultfs { dir, backing, mnt, daemon, starts: 0 }
    }

    /// An empty file system, mounted.
    pub fn new(tag: &str) -> Faultfs {
        Faultfs::with_options(tag, &[])
    }

    /// An empty file system, mounted with extra daemon options (`--journal`, ...).
    pub fn with_options(tag: &str, options: &[&str]) -> Faultfs {
        let mut f = Faultfs::layout(tag, options);
        Daemon::run(Path::new(BIN), &["--init".as_ref(), f.backing.as_os_str()]);
        f.start();
        f
    }

    /// A file system whose durable state is a copy of `src`, mounted.
    pub fn import(tag: &str, src: &Path, options: &[&str]) -> Faultfs {
        let mut f = Faultfs::layout(tag, options);
        Daemon::run(Path::new(BIN), &["--import".as_ref(), src.as_os_str(), f.backing.as_os_str()]);
        f.start();
        f
    }

    /// Starts the daemon and waits for its `ready` line.
    pub fn start(&mut self) {
        self.daemon.start();
        self.starts += 1;
    }

    pub fn log_text(&self) -> String {
        self.daemon.log_text()
    }

    /// The power cut: SIGKILL the daemon (whatever it held in memory is gone) and detach
    /// the dead mount.
    pub fn kill(&mut self) {
        self.daemon.kill();
        detach(&self.mnt);
    }

    /// Power cut and restart on the same backing store.
    pub fn power_cut(&mut self) {
        self.kill();
        self.start();
    }

    /// SIGTERM: the daemon unmounts and exits; returns its exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut c = self.daemon.take_child().expect("not running");
        // SAFETY: sending a signal to our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                return s;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                panic!("faultfs did not exit within 20 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&mut self) -> u32 {
        self.daemon.child().expect("not running").id()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() || rel == "." {
            self.mnt.clone()
        } else {
            self.mnt.join(rel)
        }
    }

    /// Sends one control command; returns the reply line.
    pub fn ctl(&self, cmd: &str) -> String {
        self.daemon.ctl(cmd)
    }

    /// One counter from `stats`.
    pub fn stat(&self, name: &str) -> u64 {
        self.daemon.stat(name)
    }
}

impl Drop for Faultfs {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("faultfs log:\n{}", self.log_text());
        }
    }
}

pub fn run_ok(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn fsync_file(path: &Path) {
    File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display())).sync_all().unwrap();
}

pub fn fdatasync_file(path: &Path) {
    File::open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
        .sync_data()
        .unwrap();
}

pub fn fsync_dir(path: &Path) {
    File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display())).sync_all().unwrap();
}

pub fn read(path: &Path) -> Vec<u8> {
    let mut v = Vec::new();
    File::open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
        .read_to_end(&mut v)
        .unwrap();
    v
}

/// Writes a whole file and makes it and its name durable.
pub fn write_durable(path: &Path, data: &[u8]) {
    fs::write(path, data).unwrap();
    fsync_file(path);
    fsync_dir(path.parent().unwrap());
}

#[path = "../../../common/rng.rs"]
mod rng;
pub use rng::Rng;
