//! A cluster whose data directory lives on faultfs (`tests/faultfs`): a FUSE file system that
//! loses every write not made durable when the power is cut, and fails chosen operations on
//! command. `make test` builds it (`make tools`).
//!
//! It serves the data directory in journal mode (`--journal`), as ext4 and xfs do, since
//! PostgreSQL relies on that for the names of the relation files it creates (`mdcreate()` never
//! fsyncs their directory), except for the data directory's top level (`--strict-dir .`): there
//! a new name, `pg_snowflake.state` renamed into place among them, is durable only once the
//! directory itself is synced, as on a file system without such a journal.

use super::*;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::Child;
use std::sync::mpsc;

/// The faultfs binary, as `make tools` builds it.
pub fn binary() -> PathBuf {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/faultfs/release/faultfs");
    assert!(
        bin.exists(),
        "{} is missing: run `make tools` (make test builds it)",
        bin.display()
    );
    bin
}

pub struct FaultFs {
    store: PathBuf,
    mount: PathBuf,
    control: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl FaultFs {
    /// Moves the (stopped) cluster's data directory onto faultfs: its files become the durable
    /// state, and the mount takes the data directory's place.
    pub fn serve(cluster: &Cluster) -> FaultFs {
        let initial = cluster.dir.join("initial");
        fs::rename(cluster.data(), &initial).unwrap();
        let store = cluster.dir.join("store");
        let out = Command::new(binary())
            .arg("--import")
            .arg(&initial)
            .arg(&store)
            .output()
            .unwrap();
        check(out, "faultfs --import");
        fs::remove_dir_all(&initial).unwrap();
        fs::create_dir(cluster.data()).unwrap();
        let mut f = FaultFs {
            store,
            mount: cluster.data(),
            control: cluster.dir.join("faultfs.sock"),
            log: cluster.dir.join("faultfs.log"),
            child: None,
        };
        f.start();
        f
    }

    /// Starts the daemon on the store and waits until it serves.
    fn start(&mut self) {
        let log = fs::File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut child = Command::new(binary())
            .arg(&self.store)
            .arg(&self.mount)
            .args(["--journal", "--strict-dir", ".", "--threads", "2"])
            .arg("--control")
            .arg(&self.control)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("faultfs runs");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) if line == "ready" => {}
            other => panic!(
                "faultfs did not start ({other:?}): these tests need root and /dev/fuse\n{}",
                fs::read_to_string(&self.log).unwrap_or_default()
            ),
        }
        self.child = Some(child);
    }

    /// A command on the control socket, and its reply.
    pub fn ctl(&self, command: &str) -> String {
        let mut s = UnixStream::connect(&self.control).unwrap();
        writeln!(s, "{command}").unwrap();
        let mut reply = String::new();
        BufReader::new(s).read_line(&mut reply).unwrap();
        let reply = reply.trim().to_string();
        assert!(reply.starts_with("ok"), "faultfs: {command}: {reply}");
        reply
    }

    /// `ctl` for teardown, where a test may already be failing: any error is ignored.
    pub fn ctl_quietly(&self, command: &str) {
        if let Ok(mut s) = UnixStream::connect(&self.control) {
            if writeln!(s, "{command}").is_ok() {
                let _ = BufReader::new(s).read_line(&mut String::new());
            }
        }
    }

    /// A counter of `stats`.
    pub fn stat(&self, name: &str) -> u64 {
        let stats = self.ctl("stats");
        stats
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {stats}"))
            .parse()
            .unwrap()
    }

    /// The power cut: every server process is killed at once (as in `Cluster::crash`), then the
    /// daemon, with everything that was not made durable; then the file system comes back
    /// with what was, as a disk does after a power cut.
    pub fn power_cut(&mut self, cluster: &Cluster) {
        let killed = cluster.kill_all();
        self.cut();
        killed.wait();
    }

    /// The file system's half of a power cut, once the processes that used it are killed. A
    /// process in a request the daemon holds dies only once the daemon is gone (the kernel
    /// waits for an answer to a request it already handed out, SIGKILL or not).
    pub fn cut(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        self.start();
    }
}

impl Drop for FaultFs {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        // The cluster, dropped first (its owners hold it before this), could not remove its
        // directory while this was mounted in it: each passing test left its store behind, about
        // 150 MB, 1.4 GB a `make test`. Kept when the test failed, as the cluster's is.
        if !std::thread::panicking() {
            if let Some(dir) = self.store.parent() {
                let _ = fs::remove_dir_all(dir);
            }
        }
    }
}
