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

// Shared with faultfs's own tests, which also take its child process (`child`, `take_child`).
#[path = "../faultfs/daemon.rs"]
#[allow(dead_code)]
mod daemon;
use daemon::Daemon;

/// The faultfs binary, as `make tools` builds it.
pub fn binary() -> PathBuf {
    let bin = crate::root_dir().join("target/faultfs/release/faultfs");
    assert!(bin.exists(), "{} is missing: run `make tools` (make test builds it)", bin.display());
    bin
}

pub struct FaultFs {
    daemon: Daemon,
}

impl FaultFs {
    /// Moves the (stopped) cluster's data directory onto faultfs: its files become the durable
    /// state, and the mount takes the data directory's place.
    pub fn serve(cluster: &Cluster) -> FaultFs {
        let initial = cluster.dir.join("initial");
        fs::rename(cluster.data(), &initial).unwrap();
        let store = cluster.dir.join("store");
        Daemon::run(&binary(), &["--import".as_ref(), initial.as_os_str(), store.as_os_str()]);
        fs::remove_dir_all(&initial).unwrap();
        fs::create_dir(cluster.data()).unwrap();
        let (control, log) = (cluster.dir.join("faultfs.sock"), cluster.dir.join("faultfs.log"));
        let mut daemon = Daemon::new(&binary(), store, cluster.data(), control, log);
        daemon.options =
            ["--journal", "--strict-dir", ".", "--threads", "2"].map(String::from).into();
        daemon.start();
        FaultFs { daemon }
    }

    /// A command on the control socket, and its reply, which must be `ok ...`.
    pub fn ctl(&self, command: &str) -> String {
        let reply = self.daemon.ctl(command);
        assert!(reply.starts_with("ok"), "faultfs: {command}: {reply}");
        reply
    }

    /// `ctl` for teardown, where a test may already be failing: any error is ignored.
    pub fn ctl_quietly(&self, command: &str) {
        self.daemon.ctl_quietly(command)
    }

    /// A counter of `stats`.
    pub fn stat(&self, name: &str) -> u64 {
        self.daemon.stat(name)
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
        self.daemon.kill();
        self.daemon.start();
    }
}

impl Drop for FaultFs {
    fn drop(&mut self) {
        self.daemon.kill();
        // The cluster, dropped first (its owners hold it before this), could not remove its
        // directory while this was mounted in it: each passing test left its store behind, about
        // 150 MB, 1.4 GB a `make test`. Kept when the test failed, as the cluster's is.
        if !std::thread::panicking() {
            if let Some(dir) = self.daemon.store.parent() {
                let _ = fs::remove_dir_all(dir);
            }
        }
    }
}
