//! Test harness: runs the real `faultfs` binary on a temporary backing store, mounts it as
//! root, and cuts the power (SIGKILL, lazy unmount, restart on the same store).
//!
//! Nothing is skipped: without root or FUSE the tests fail with a message saying so.

#![allow(dead_code)]

use std::ffi::CString;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
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

/// One faultfs daemon serving one backing store at one mount point.
pub struct Faultfs {
    pub dir: TempDir,
    pub backing: PathBuf,
    pub mnt: PathBuf,
    pub sock: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    pub starts: u32,
    /// Extra options for every start of the daemon (e.g. `--journal`).
    pub options: Vec<String>,
}

impl Faultfs {
    fn layout(tag: &str) -> Faultfs {
        require_root();
        let dir = TempDir::new(tag);
        let mnt = dir.0.join("mnt");
        fs::create_dir(&mnt).unwrap();
        Faultfs {
            backing: dir.0.join("backing"),
            sock: dir.0.join("ctl"),
            log: dir.0.join("faultfs.log"),
            mnt,
            dir,
            child: None,
            starts: 0,
            options: Vec::new(),
        }
    }

    /// An empty file system, mounted.
    pub fn new(tag: &str) -> Faultfs {
        Faultfs::with_options(tag, &[])
    }

    /// An empty file system, mounted with extra daemon options.
    pub fn with_options(tag: &str, options: &[&str]) -> Faultfs {
        let mut f = Faultfs::layout(tag);
        f.options = options.iter().map(|s| s.to_string()).collect();
        run_ok(Command::new(BIN).arg("--init").arg(&f.backing));
        f.start();
        f
    }

    /// A file system whose durable state is a copy of `src`, mounted.
    pub fn import(tag: &str, src: &Path, options: &[&str]) -> Faultfs {
        let mut f = Faultfs::layout(tag);
        f.options = options.iter().map(|s| s.to_string()).collect();
        run_ok(Command::new(BIN).arg("--import").arg(src).arg(&f.backing));
        f.start();
        f
    }

    /// Starts the daemon and waits for its `ready` line.
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "already running");
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut child = Command::new(BIN)
            .arg(&self.backing)
            .arg(&self.mnt)
            .arg("--control")
            .arg(&self.sock)
            .args(&self.options)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("cannot run faultfs");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(line) if line == "ready" => break,
                Ok(_) => {}
                Err(_) => {
                    if let Some(status) = child.try_wait().unwrap() {
                        panic!(
                            "faultfs exited ({status}) before `ready`: FUSE could not be mounted at {} \
                             (these tests need root and /dev/fuse; they do not skip). Log:\n{}",
                            self.mnt.display(),
                            self.log_text()
                        );
                    }
                    if Instant::now() > deadline {
                        let _ = child.kill();
                        panic!(
                            "faultfs did not print `ready` within 20 s. Log:\n{}",
                            self.log_text()
                        );
                    }
                }
            }
        }
        self.child = Some(child);
        self.starts += 1;
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The power cut: SIGKILL the daemon (whatever it held in memory is gone) and detach
    /// the dead mount.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        detach(&self.mnt);
    }

    /// Power cut and restart on the same backing store.
    pub fn power_cut(&mut self) {
        self.kill();
        self.start();
    }

    /// SIGTERM: the daemon unmounts and exits; returns its exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("not running");
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

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("not running").id()
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
        let mut s = UnixStream::connect(&self.sock).expect("control socket");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        writeln!(s, "{cmd}").unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        line.trim_end().to_string()
    }

    /// One counter from `stats`.
    pub fn stat(&self, name: &str) -> u64 {
        let reply = self.ctl("stats");
        let rest = reply
            .strip_prefix("ok ")
            .unwrap_or_else(|| panic!("stats: {reply}"));
        rest.split(' ')
            .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .unwrap_or_else(|| panic!("no {name} in {reply}"))
            .parse()
            .unwrap()
    }
}

impl Drop for Faultfs {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("faultfs log ({}):\n{}", self.log.display(), self.log_text());
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
    File::open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
        .sync_all()
        .unwrap();
}

pub fn fdatasync_file(path: &Path) {
    File::open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
        .sync_data()
        .unwrap();
}

pub fn fsync_dir(path: &Path) {
    File::open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
        .sync_all()
        .unwrap();
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

/// A small deterministic generator (SplitMix64), so that a printed seed replays a run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}
