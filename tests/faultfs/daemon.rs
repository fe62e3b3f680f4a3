//! The faultfs daemon as a test runs it: started on a store at a mount point and waited for
//! until it serves, spoken to on its control socket, killed for a power cut. One file for both
//! test harnesses, included by path: faultfs's own (`tests/faultfs/tests/common`) and
//! pg_snowflake's (`tests/common/faultfs.rs`), which are two cargo workspaces.
//!
//! Nothing is skipped: without root or FUSE, `start` fails and says so.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a start may take, and a control command's answer.
const PATIENCE: Duration = Duration::from_secs(20);

/// One daemon serving one store at one mount point, its stderr appended to `log`.
pub struct Daemon {
    bin: PathBuf,
    pub store: PathBuf,
    pub mount: PathBuf,
    control: PathBuf,
    log: PathBuf,
    /// Options of every start (`--journal`, ...).
    pub options: Vec<String>,
    child: Option<Child>,
}

impl Daemon {
    /// Not started yet; `control` and `log` are files it makes.
    pub fn new(
        bin: &Path,
        store: PathBuf,
        mount: PathBuf,
        control: PathBuf,
        log: PathBuf,
    ) -> Daemon {
        Daemon { bin: bin.into(), store, mount, control, log, options: Vec::new(), child: None }
    }

    /// `faultfs ARGS...` run to its end (`--init`, `--import`), which must succeed.
    pub fn run(bin: &Path, args: &[&std::ffi::OsStr]) {
        let out = Command::new(bin).args(args).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "faultfs {args:?} failed: {stdout}\n{stderr}");
    }

    /// Starts it and waits for its `ready` line.
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "already running");
        let log = File::options().create(true).append(true).open(&self.log).unwrap();
        let mut child = Command::new(&self.bin)
            .arg(&self.store)
            .arg(&self.mount)
            .arg("--control")
            .arg(&self.control)
            .args(&self.options)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("cannot run faultfs");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + PATIENCE;
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(line) if line == "ready" => break,
                Ok(_) => {}
                Err(_) => {
                    if let Some(status) = child.try_wait().unwrap() {
                        panic!(
                            "faultfs exited ({status}) before `ready`: FUSE could not be mounted \
                             at {} (these tests need root and /dev/fuse; they do not skip). \
                             Log:\n{}",
                            self.mount.display(),
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
    }

    /// The daemon's process, while it runs.
    pub fn child(&mut self) -> Option<&mut Child> {
        self.child.as_mut()
    }

    /// Its process, taken over by the caller (which then ends it).
    pub fn take_child(&mut self) -> Option<Child> {
        self.child.take()
    }

    /// The power cut: SIGKILL (whatever it held in memory is gone), and the dead mount
    /// detached.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("umount").arg("-l").arg(&self.mount).stderr(Stdio::null()).status();
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// One control command; its reply line (`ok ...` or `error ...`).
    pub fn ctl(&self, command: &str) -> String {
        let mut s = UnixStream::connect(&self.control).expect("control socket");
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        writeln!(s, "{command}").unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        line.trim_end().to_string()
    }

    /// `ctl` for teardown, where a test may already be failing: any error is ignored.
    pub fn ctl_quietly(&self, command: &str) {
        if let Ok(mut s) = UnixStream::connect(&self.control) {
            let _ = s.set_read_timeout(Some(PATIENCE));
            if writeln!(s, "{command}").is_ok() {
                let _ = BufReader::new(s).read_line(&mut String::new());
            }
        }
    }

    /// One counter of `stats`.
    pub fn stat(&self, name: &str) -> u64 {
        let reply = self.ctl("stats");
        let rest = reply.strip_prefix("ok ").unwrap_or_else(|| panic!("stats: {reply}"));
        rest.split(' ')
            .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .unwrap_or_else(|| panic!("no {name} in {reply}"))
            .parse()
            .unwrap()
    }
}
