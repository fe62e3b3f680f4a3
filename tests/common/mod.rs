//! A real PostgreSQL cluster per test, run as the `postgres` user (PostgreSQL refuses root):
//! initdb, start, connect, restart, crash, with the installed pg_snowflake preloaded.
//!
//! The suites test the extension installed in the PostgreSQL that `PG_CONFIG` (default
//! `pg_config`) names; `make test` installs the current build first.

// `mutant!`: the harness's own mutation points (scripts/mutations.sh).
#[macro_use]
extern crate pg_snowflake_core;

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub use postgres::{Client, NoTls};

pub mod benchmarks;
pub mod citus;
pub mod debian_root;
pub mod failover;
pub mod fake_registry;
pub mod faultfs;
pub mod files;
pub mod http;
pub mod image;
pub mod load;
pub mod mallory;
pub mod nemesis;
pub mod network_namespace;
pub mod private_network;
pub mod proxy;
pub mod registry;
pub mod release;
pub mod rng;
pub use rng::{seed, Rng};

/// libfaketime's multi-threaded library, found through its Debian package so that any
/// architecture works. A test that needs it fails when it is missing instead of running on the
/// real clock.
pub fn faketime_lib() -> String {
    let out = Command::new("dpkg").args(["-L", "libfaketime"]).output().expect("dpkg runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.ends_with("/libfaketimeMT.so.1"))
        .unwrap_or_else(|| panic!("libfaketime is not installed: run scripts/setup.sh"))
        .to_string()
}

/// Sets a stop flag when dropped, a panic's unwinding included. `std::thread::scope` waits for
/// its threads before a panic of the scope's own thread goes on: workers that loop until the
/// flag is set would keep that panic waiting for good (a test once hung 1,200 s so, until the
/// suite runner killed it). Hold one in the scope's thread for as long as workers loop.
pub struct StopOnDrop<'a>(pub &'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

pub struct Cluster {
    pub name: String,
    pub dir: PathBuf,
    pub port: u16,
    bindir: PathBuf,
    env: Vec<(String, String)>,
    /// Set by `use_fake_clock`: every start checks that the fake clock took effect.
    fake_clock: Option<FakeClock>,
    /// Set by `init_in`: the network namespace the server runs in (`ip netns exec`), reached
    /// through its unix socket in `dir`.
    netns: Option<String>,
}

/// The pg_config of the server under test.
pub fn default_pg_config() -> String {
    std::env::var("PG_CONFIG").unwrap_or_else(|_| "pg_config".into())
}

/// The major of the server `PG_CONFIG` names ("15" of "PostgreSQL 15.20 (Debian ...)", "19" of
/// "PostgreSQL 19rc1 (Debian 19~rc1-1)": its leading digits, as a release candidate has no dot).
pub fn major_under_test() -> String {
    let out = Command::new(default_pg_config()).arg("--version").output().expect("pg_config runs");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches("PostgreSQL ")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect()
}

/// The repository's top directory (scripts/, sql/, target/), two above this crate's.
pub fn root_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

pub fn pg_config(pg_config: &str, arg: &str) -> PathBuf {
    let out = Command::new(pg_config).arg(arg).output().expect("pg_config runs");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

pub fn running_as_root() -> bool {
    fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// A command run as `postgres` when the tests run as root, else as the current user.
/// `env` goes through `env(1)` under runuser, so the server gets it whatever runuser resets.
pub fn as_postgres(program: &Path, env: &[(String, String)]) -> Command {
    if running_as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "env"]);
        c.args(env.iter().map(|(k, v)| format!("{k}={v}")));
        c.arg(program);
        c
    } else {
        let mut c = Command::new(program);
        c.envs(env.iter().map(|(k, v)| (k, v)));
        c
    }
}

pub fn check(out: Output, what: &str) -> Output {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The shortest registry lease there is (a renewal every 3.3 s), so that leases run out within a
/// test.
pub const SHORTEST_LEASE: &str = "snowflake.registry_lease = '10s'";

/// A port nothing listens on, and that this process has not handed out before.
///
/// Taken below the kernel's ephemeral range (ip_local_port_range, 32768-60999 by default), where
/// no outgoing connection takes its local port: a port that `bind(0)` gave could be taken by a
/// client's connection before the server bound it, and the kernel may give the same free port
/// twice (a Patroni test once started its etcd and a PostgreSQL on one port; PostgreSQL then
/// could not bind, and Patroni gave up bootstrapping).
///
/// Suites that run at the same time (scripts/test-suites.py) are told their lane, `k/n`, in
/// PG_SNOWFLAKE_TEST_LANE: each takes its ports from the k-th of n blocks of those, so no
/// other suite running beside it hands out the same port. (Not by `port % n`: Linux gives
/// `bind(0)` odd ports only, and lane 0 of 2 waited for an even one forever.)
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    // At most this many ports, all below the ephemeral range and above the privileged ports.
    const PORTS: u32 = 12_288;
    // A prime stride (it shares no factor with any block's size but its own, which a block is
    // kept from being, so every port comes up once) spreads one process's ports over its block.
    const STRIDE: u32 = 7_919;
    let (lane, lanes) = test_lane();
    let ephemeral_low: u32 = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768);
    let base = ephemeral_low.saturating_sub(PORTS).max(1024);
    let mut block = ephemeral_low.saturating_sub(base) / lanes;
    assert!(
        block >= 256,
        "ports {base}..{ephemeral_low}, below the ephemeral range (ip_local_port_range), \
         are too few for {lanes} lanes of tests"
    );
    if block == STRIDE {
        block -= 1;
    }
    let first = mutant!(test_lanes, { base + lane * block }, { base });
    // Where to start in the block: another process of another run may use the same block.
    let start = std::process::id()
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
    for i in 0..block {
        let port = u16::try_from(first + (start % block + i * STRIDE) % block).unwrap();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() && GIVEN.lock().unwrap().insert(port) {
            return port;
        }
    }
    panic!("no free port in {first}..{}", first + block);
}

/// This suite's lane and the number of lanes (0 of 1 when run alone, as `cargo test` does).
fn test_lane() -> (u32, u32) {
    let Ok(given) = std::env::var("PG_SNOWFLAKE_TEST_LANE") else {
        return (0, 1);
    };
    let parsed = given.split_once('/').and_then(|(k, n)| Some((k.parse().ok()?, n.parse().ok()?)));
    match parsed {
        Some((k, n)) if k < n => (k, n),
        _ => panic!("PG_SNOWFLAKE_TEST_LANE is {given:?}, not k/n with k < n"),
    }
}

/// Where test clusters live: under /tmp, because a checkout under /root is not readable by
/// `postgres`. One directory per test and process, removed when the test passes.
///
/// Anyone may create that name in /tmp first: `scripts/own-dir.sh`, as for `make test-pgrx`,
/// uses it only if it is a real directory of root's, postgres's or this user's that nobody else
/// may write, and (as root) hands it to postgres.
fn base_dir() -> PathBuf {
    let base = std::env::temp_dir().join("pg_snowflake-tests");
    let own_dir = root_dir().join("scripts/own-dir.sh");
    check(Command::new(own_dir).arg(&base).output().unwrap(), "scripts/own-dir.sh");
    static LEFTOVERS: std::sync::Once = std::sync::Once::new();
    LEFTOVERS.call_once(|| remove_leftovers(&base));
    base
}

/// Removes what earlier runs left in `base`. A failed test keeps its directory (its server's
/// log is printed, the files stay to look at) and a killed run keeps all of them: after a day
/// of runs there were 634 directories, 21 GB, and a CI run on the same machine failed at
/// initdb with "No space left on device". A directory is named `name-PID-n` (`fresh_dir`); it
/// goes once process PID has ended, nothing in it has changed for 10 minutes (a failed suite's
/// directory outlives the suites still running beside it, and stays for a look), and no server
/// runs in it. Without /proc nothing can be told about a pid, so nothing goes.
pub fn remove_leftovers(base: &Path) {
    if mutant!(leftovers, { !Path::new("/proc/self").exists() }, { true }) {
        return;
    }
    let Ok(entries) = fs::read_dir(base) else { return };
    let since = std::time::SystemTime::now() - Duration::from_secs(600);
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let mut parts = name.rsplitn(3, '-');
        let (Some(n), Some(pid), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        // postgres, which runs the servers, owns `base` too: an entry that is no directory of
        // its own (a link, say) is not followed.
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if !is_dir || n.parse::<usize>().is_err() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let changed = entry.metadata().is_ok_and(|m| m.modified().is_ok_and(|t| t > since));
        if !changed && !in_use(&entry.path(), since, 8) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether anything under `dir`, down to `depth` levels (links not followed), changed since
/// `since` or is the postmaster.pid of a live server. A Debian root's servers keep theirs five
/// levels down (root/var/lib/postgresql/NAME/data).
fn in_use(dir: &Path, since: std::time::SystemTime, depth: u32) -> bool {
    let Ok(entries) = fs::read_dir(dir) else { return false };
    entries.flatten().any(|entry| {
        let Ok(meta) = entry.metadata() else { return false };
        meta.modified().is_ok_and(|t| t > since)
            || (meta.is_dir() && depth > 0 && in_use(&entry.path(), since, depth - 1))
            || (meta.is_file()
                && entry.file_name() == "postmaster.pid"
                && first_line_of(&entry.path()).is_some_and(|l| is_live_postmaster(l.trim())))
    })
}

/// The first line of a regular file, from its first 64 bytes. Opened without following a link
/// and without waiting: a FIFO swapped in under the name would wait for a writer for good.
fn first_line_of(path: &Path) -> Option<String> {
    let head = files::read_head(path, 64).ok()?;
    String::from_utf8_lossy(&head).lines().next().map(str::to_string)
}

/// A directory no other cluster of this run uses. Tests of one binary run in parallel in one
/// process, so the pid alone is not enough: two tests that named their clusters alike once
/// shared a directory and one initdb removed the other's.
fn fresh_dir(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = base_dir().join(format!("{name}-{}-{n}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

/// A new empty directory owned by `postgres`, for tools that make their own clusters. Made, not
/// found: a name that exists (a link `postgres` planted in the base directory) fails.
pub fn scratch_dir(name: &str) -> PathBuf {
    scratch_dir_mode(name, 0o755)
}

/// `scratch_dir` that no other local user may enter: for servers that put their unix sockets
/// in it (Patroni's, pg_auto_failover's), which trust local connections.
pub fn private_scratch_dir(name: &str) -> PathBuf {
    scratch_dir_mode(name, 0o700)
}

fn scratch_dir_mode(name: &str, mode: u32) -> PathBuf {
    let dir = fresh_dir(name);
    // Made with its mode (no chmod after: the name is in a directory of postgres's).
    std::os::unix::fs::DirBuilderExt::mode(&mut fs::DirBuilder::new(), mode)
        .create(&dir)
        .unwrap_or_else(|e| panic!("making {}: {e}", dir.display()));
    owned_by_postgres(&dir);
    dir
}

/// Hands a directory the tests created to `postgres`, which runs the servers.
fn owned_by_postgres(dir: &Path) {
    if running_as_root() {
        // -h: a symlink swapped in for the name would be changed itself, not its target.
        chown_to_postgres("-h", dir);
    }
}

/// `chown <option> postgres:postgres <path>`, which must succeed: `-h` to change a symbolic
/// link itself, `-R` for a whole tree.
pub fn chown_to_postgres(option: &str, path: &Path) {
    let out = Command::new("chown").args([option, "postgres:postgres"]).arg(path).output();
    check(out.unwrap(), "chown");
}

/// What every test server's postgresql.conf starts with: TCP on 127.0.0.1 only, at `port`, no
/// Unix socket, pg_snowflake preloaded, worker id 1; then `conf` (later lines win).
pub fn server_conf(port: u16, conf: &[&str]) -> Vec<String> {
    let mut lines = vec![
        "listen_addresses = '127.0.0.1'".to_string(),
        format!("port = {port}"),
        "unix_socket_directories = ''".into(),
        "shared_preload_libraries = 'pg_snowflake'".into(),
        "snowflake.worker_id = 1".into(),
    ];
    lines.extend(conf.iter().map(|s| s.to_string()));
    lines
}

impl Cluster {
    /// initdb a new cluster that preloads pg_snowflake with worker id 1, plus `conf` lines
    /// (later lines win). Not started.
    pub fn init(name: &str, conf: &[&str]) -> Cluster {
        Cluster::init_with(name, &default_pg_config(), &[], conf)
    }

    /// `init` for the server that `pg_config` names, with extra initdb arguments.
    pub fn init_with(name: &str, pg_config_path: &str, initdb: &[&str], conf: &[&str]) -> Cluster {
        let so = pg_config(pg_config_path, "--pkglibdir").join("pg_snowflake.so");
        assert!(so.exists(), "{} is missing: run `make install` first", so.display());
        Cluster::init_server(name, pg_config_path, initdb, conf)
    }

    /// `init_with` for a server that finds pg_snowflake elsewhere than in its own library
    /// directory (`conf` says where: an extension image's `dynamic_library_path`).
    pub fn init_server(
        name: &str,
        pg_config_path: &str,
        initdb: &[&str],
        conf: &[&str],
    ) -> Cluster {
        let bindir = pg_config(pg_config_path, "--bindir");
        let dir = fresh_dir(name);
        let cluster = Cluster {
            name: name.into(),
            dir,
            port: free_port(),
            bindir,
            env: vec![],
            fake_clock: None,
            netns: None,
        };
        check(
            as_postgres(&cluster.bindir.join("initdb"), &[])
                .args(["-A", "trust", "-U", "postgres", "--no-sync"])
                .args(initdb)
                .arg("-D")
                .arg(cluster.data())
                .output()
                .unwrap(),
            "initdb",
        );
        let lines = server_conf(cluster.port, &[&["max_connections = 40"], conf].concat());
        cluster.append_conf(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        cluster
    }

    /// init + start.
    pub fn start_new(name: &str, conf: &[&str]) -> Cluster {
        let c = Cluster::init(name, conf);
        c.start();
        c
    }

    pub fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// `n` sessions of the superuser in `postgres`.
    pub fn sessions(&self, n: usize) -> Vec<Client> {
        (0..n).map(|_| self.connect()).collect()
    }

    /// Its server log (made by `pg_ctl` as `postgres`, read without following a link).
    pub fn log(&self) -> String {
        files::read_text(&self.log_path())
    }

    /// Waits until a line of its log after byte `from` says every one of `parts`; prints it.
    #[track_caller]
    pub fn await_log_line(&self, from: usize, parts: &[&str]) {
        poll(Duration::from_secs(30), Duration::from_millis(200), || {
            let log = self.log();
            let line = log
                .get(from..)
                .unwrap_or_default()
                .lines()
                .find(|l| parts.iter().all(|part| l.contains(part)));
            line.map(|l| println!("{l}")).ok_or(format!("{}: no line of {parts:?} yet", self.name))
        });
    }

    /// Its log says `text`; else the test fails, saying `why` and showing the log.
    #[track_caller]
    pub fn assert_logged(&self, text: &str, why: &str) {
        let log = self.log();
        assert!(log.contains(text), "{}: {why}: the log lacks {text:?}:\n{log}", self.name);
    }

    /// Ids are refused because a snowflake.* setting was refused at start (55000, with the
    /// hint that says to correct them).
    #[track_caller]
    pub fn assert_ids_refused_at_start(&self) {
        let mut c = self.connect_ext();
        let ServerError { code: state, message, hint, .. } =
            expect_error(&mut c, "SELECT snowflake_next()");
        assert_eq!(state, "55000", "{}: {message}", self.name);
        assert!(message.contains("refused at server start"), "{message}");
        assert!(hint.contains("snowflake.* settings"), "{hint}");
    }

    pub fn append_conf(&self, lines: &[&str]) {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let conf = self.data().join("postgresql.conf");
        files::append(&conf, text.as_bytes())
            .unwrap_or_else(|e| panic!("{}: appending to postgresql.conf: {e}", self.name));
    }

    /// Environment for the server processes from the next start on (for instance libfaketime).
    fn set_env(&mut self, env: &[(&str, &str)]) {
        self.env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    }

    /// Stops the server if it runs, without waiting for anything (for teardown).
    pub fn stop_if_running(&self) {
        if self.data().join("postmaster.pid").exists() {
            let _ = self.pg_ctl(&["stop", "-w", "-m", "immediate"]);
        }
    }

    /// One more environment variable for the server processes, from the next start on.
    pub fn add_env(&mut self, key: &str, value: &str) {
        self.env.push((key.to_string(), value.to_string()));
    }

    /// The environment of the running postmaster, as the kernel has it.
    pub fn postmaster_env(&self) -> Vec<String> {
        let pid = self.postmaster_pid().expect("the server is running");
        fs::read(format!("/proc/{pid}/environ"))
            .map(|b| {
                b.split(|&c| c == 0).map(|v| String::from_utf8_lossy(v).into_owned()).collect()
            })
            .unwrap_or_default()
    }

    fn pg_ctl(&self, args: &[&str]) -> Output {
        let mut command = as_postgres(&self.bindir.join("pg_ctl"), &self.env);
        if let Some(ns) = &self.netns {
            let inner = command;
            command = Command::new("ip");
            command.args(["netns", "exec", ns]).arg(inner.get_program()).args(inner.get_args());
        }
        command.args(args).arg("-D").arg(self.data()).stdin(Stdio::null()).output().unwrap()
    }

    pub fn start(&self) {
        let log = self.log_path();
        let out = self.pg_ctl(&["start", "-w", "-t", "60", "-l", log.to_str().unwrap()]);
        if !out.status.success() {
            panic!(
                "pg_ctl start failed:\n{}\n--- server log ---\n{}",
                String::from_utf8_lossy(&out.stderr),
                self.log()
            );
        }
        if let Some(clock) = &self.fake_clock {
            clock.check();
        }
    }

    /// pg_ctl start that is expected to fail; returns the server log.
    pub fn start_fails(&self) -> String {
        let log = self.log_path();
        let out = self.pg_ctl(&["start", "-w", "-t", "30", "-l", log.to_str().unwrap()]);
        assert!(!out.status.success(), "the server started but should not have");
        self.log()
    }

    /// `mode`: smart, fast or immediate.
    pub fn stop(&self, mode: &str) {
        check(self.pg_ctl(&["stop", "-w", "-t", "60", "-m", mode]), "pg_ctl stop");
    }

    pub fn restart(&self, mode: &str) {
        self.stop(mode);
        self.start();
    }

    /// Ends recovery of a standby and waits until it accepts writes.
    pub fn promote(&self) {
        check(self.pg_ctl(&["promote", "-w", "-t", "60"]), "pg_ctl promote");
    }

    pub fn reload(&self) {
        check(self.pg_ctl(&["reload"]), "pg_ctl reload");
    }

    /// The running postmaster (never the stale pid a killed one left in its pid file).
    pub fn postmaster_pid(&self) -> Option<i32> {
        live_postmaster_pid(&self.data())
    }

    /// SIGKILL to the postmaster and all its children, as a power loss would stop them, then
    /// waits until they are gone.
    pub fn crash(&self) {
        self.kill_all().wait();
    }

    /// SIGKILL to the postmaster and all its children, without waiting. The postmaster is
    /// stopped (SIGSTOP) first, so that it cannot fork a child between the listing of its
    /// children and the kill; every child is its own process group (postmaster children call
    /// setsid), so a group kill would not reach them.
    pub fn kill_all(&self) -> Killed {
        let pid = self.postmaster_pid().expect("the server is running");
        signal(pid, "STOP");
        let mut pids = vec![pid];
        pids.extend(children_of(pid));
        let _ = Command::new("kill").arg("-KILL").args(pids.iter().map(i32::to_string)).status();
        Killed { pids }
    }

    /// The server process whose command line (its title, `postgres: ... pg_snowflake registry`)
    /// contains `title`, if one runs.
    pub fn process_titled(&self, title: &str) -> Option<i32> {
        children_of(self.postmaster_pid()?).into_iter().find(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(title))
        })
    }

    /// The backend serving `client`, killed with SIGKILL alone: the postmaster then ends every
    /// other backend, resets shared memory and runs crash recovery while it keeps running.
    pub fn kill_backend(&self, pid: i32) {
        signal(pid, "KILL");
    }

    pub fn conninfo(&self, user: &str) -> String {
        // A server in a network namespace of its own is reached through its unix socket: its
        // 127.0.0.1 is not this process's.
        let host = match &self.netns {
            Some(_) => self.dir.to_string_lossy().into_owned(),
            None => "127.0.0.1".into(),
        };
        format!("host={host} port={} user={user} dbname=postgres connect_timeout=10", self.port)
    }

    /// `init` for a server that runs in network namespace `ns` (see `network_namespace`): it
    /// listens on its unix socket only, in its own directory.
    pub fn init_in(ns: &network_namespace::Namespace, name: &str, conf: &[&str]) -> Cluster {
        let mut cluster = Cluster::init(name, conf);
        cluster.netns = Some(ns.name.clone());
        let dir = cluster.dir.to_string_lossy().into_owned();
        cluster
            .append_conf(&["listen_addresses = ''", &format!("unix_socket_directories = '{dir}'")]);
        cluster
    }

    pub fn connect(&self) -> Client {
        self.connect_as("postgres")
    }

    /// A connection as `user` to database `db`.
    pub fn connect_db(&self, user: &str, db: &str) -> Client {
        let conninfo = self.conninfo(user).replace("dbname=postgres", &format!("dbname={db}"));
        Client::connect(&conninfo, NoTls)
            .unwrap_or_else(|e| panic!("connect to {db} of {}: {e}\n{}", self.name, self.log()))
    }

    pub fn connect_as(&self, user: &str) -> Client {
        Client::connect(&self.conninfo(user), NoTls)
            .unwrap_or_else(|e| panic!("connect to {}: {e}\n{}", self.name, self.log()))
    }

    /// A connection with the extension created (idempotent).
    pub fn connect_ext(&self) -> Client {
        let mut c = self.connect();
        c.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_snowflake").unwrap();
        c
    }

    /// Gives the server a clock this test controls: libfaketime reads the offset from a file on
    /// every call (`FAKETIME_NO_CACHE`), so `set_clock_offset` moves the clock of a running
    /// server. The monotonic clock stays real, so PostgreSQL's own timeouts are unaffected.
    /// Takes effect from the next start.
    pub fn use_fake_clock(&mut self) -> FakeClock {
        let file = self.dir.join("faketime");
        let clock = FakeClock {
            file: file.clone(),
            conninfo: self.conninfo("postgres"),
            data: self.data(),
        };
        clock.set(0.0);
        self.fake_clock = Some(clock.clone());
        let lib = faketime_lib();
        self.set_env(&[
            ("LD_PRELOAD", lib.as_str()),
            ("FAKETIME_TIMESTAMP_FILE", file.to_str().unwrap()),
            ("FAKETIME_NO_CACHE", "1"),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ]);
        clock
    }

    /// A new server with `conf`, started with a clock this test controls (`use_fake_clock`),
    /// at the real time until the test moves it.
    pub fn start_with_fake_clock(name: &str, conf: &[&str]) -> (Cluster, FakeClock) {
        let mut cluster = Cluster::init(name, conf);
        let clock = cluster.use_fake_clock();
        cluster.start();
        (cluster, clock)
    }

    /// A standby (as `basebackup`, not started) whose clock runs `offset_s` seconds off the
    /// real time from its first start.
    pub fn basebackup_with_clock(&self, name: &str, offset_s: f64) -> (Cluster, FakeClock) {
        let mut standby = self.basebackup(name);
        let clock = standby.use_fake_clock();
        clock.set(offset_s);
        (standby, clock)
    }

    /// A cluster of the same server binaries in a new directory, on a port of its own, with no
    /// data directory yet (a standby's or a copy's to come).
    fn sibling(&self, name: &str) -> Cluster {
        Cluster {
            name: name.into(),
            dir: scratch_dir(name),
            port: free_port(),
            bindir: self.bindir.clone(),
            env: vec![],
            fake_clock: None,
            netns: None,
        }
    }

    /// A copy of this (stopped) cluster's data directory, to run in network namespace `ns`.
    pub fn copy_in(&self, ns: &network_namespace::Namespace, name: &str) -> Cluster {
        let mut copy = self.copy(name);
        copy.netns = Some(ns.name.clone());
        let dir = copy.dir.to_string_lossy().into_owned();
        copy.append_conf(&["listen_addresses = ''", &format!("unix_socket_directories = '{dir}'")]);
        copy
    }

    /// A streaming standby of this (running) cluster, made with `pg_basebackup -R`; not started.
    /// It inherits the primary's postgresql.conf, worker id included.
    pub fn basebackup(&self, name: &str) -> Cluster {
        let port = self.port.to_string();
        let args = ["-h", "127.0.0.1", "-p", &port, "-U", "postgres"];
        let args = [&args[..], &["-R", "-X", "stream", "-c", "fast", "-D"]].concat();
        let mut pg_basebackup = as_postgres(&self.bin("pg_basebackup"), &[]);
        pg_basebackup.args(args);
        self.sibling_made_by(name, pg_basebackup, "pg_basebackup")
    }

    /// A copy of this (stopped) cluster's data directory, as an image, a disk snapshot or `cp -a`
    /// makes one, on a port of its own; not started.
    pub fn copy(&self, name: &str) -> Cluster {
        assert!(self.postmaster_pid().is_none(), "{} runs: copy a stopped cluster", self.name);
        let mut cp = as_postgres(Path::new("/bin/cp"), &[]);
        cp.arg("-a").arg(self.data());
        self.sibling_made_by(name, cp, "cp -a of the data directory")
    }

    /// A cluster beside this one (see `sibling`) whose data directory `command`, given it as
    /// its last argument, makes (`what` names it if it fails), on a port of its own; not started.
    fn sibling_made_by(&self, name: &str, mut command: Command, what: &str) -> Cluster {
        let made = self.sibling(name);
        check(command.arg(made.data()).output().unwrap(), what);
        made.append_conf(&[&format!("port = {}", made.port)]);
        made
    }

    pub fn bin(&self, name: &str) -> PathBuf {
        self.bindir.join(name)
    }

    pub fn bindir(&self) -> &Path {
        &self.bindir
    }

    /// A server program (pg_upgrade, pg_waldump) run as `postgres` in `cwd`.
    pub fn server_cmd(&self, program: &str, cwd: &Path) -> Command {
        let mut c = as_postgres(&self.bin(program), &[]);
        c.current_dir(cwd).stdin(Stdio::null());
        c
    }

    /// Runs a client program (pgbench, psql) against this cluster as the current user.
    pub fn client_cmd(&self, program: &str) -> Command {
        let mut c = Command::new(self.bin(program));
        c.env("PGHOST", "127.0.0.1")
            .env("PGPORT", self.port.to_string())
            .env("PGUSER", "postgres")
            .env("PGDATABASE", "postgres");
        c
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.data().join("postmaster.pid").exists() {
            let _ = self.pg_ctl(&["stop", "-w", "-m", "immediate"]);
        }
        // An assert-enabled server logs a failed assertion as TRAP and aborts the process; a
        // test whose client happened to survive it must not pass.
        let log = self.log();
        if !std::thread::panicking() && log.contains("TRAP:") {
            // A mark for whoever looks at the directory later; never over a link.
            let _ = files::create_new(&self.dir.join("TRAP"), b"");
            panic!("server {} failed an assertion:\n{log}", self.name);
        }
        if std::thread::panicking() {
            eprintln!(
                "--- server log of {} ({}) ---\n{}",
                self.name,
                self.dir.display(),
                self.log()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// The clock of a server started after `Cluster::use_fake_clock`.
#[derive(Clone)]
pub struct FakeClock {
    file: PathBuf,
    conninfo: String,
    data: PathBuf,
}

/// Writes a libfaketime offset file whole: a new file renamed over the old one. A running server
/// reads it at every clock call (FAKETIME_NO_CACHE), and `fs::write` truncates first: a backend
/// that read the empty file once failed to parse it, and hung inside libfaketime until killed
/// (seen once in sid's root, 5 minutes, in a test that turned the clock back to 0 s).
pub fn write_clock_file(file: &Path, offset_s: f64) {
    files::replace(file, format!("{offset_s:+}s\n").as_bytes())
        .unwrap_or_else(|e| panic!("writing the clock file: {e}"));
}

impl FakeClock {
    /// Moves the server's clock to `offset_s` seconds from the real time. If the server is
    /// running, checks that its clock moved (else libfaketime did not take effect and the test
    /// would silently run on the real clock); otherwise `Cluster::start` checks it.
    pub fn set(&self, offset_s: f64) {
        write_clock_file(&self.file, offset_s);
        if postmaster_alive(&self.data) {
            self.check();
        }
    }

    /// The offset the clock file asks for.
    fn wanted_s(&self) -> f64 {
        let text = files::read(&self.file).expect("the clock file");
        String::from_utf8_lossy(&text).trim().trim_end_matches('s').parse().unwrap()
    }

    /// Fails unless the server's clock is at the offset the file asks for (within 1 s).
    pub fn check(&self) {
        let mut c = Client::connect(&self.conninfo, NoTls).expect("connect to check the clock");
        assert_clock_offset(&mut c, self.wanted_s(), "the server");
    }
}

/// Fails unless the clock of the server behind `c` is `wanted_s` seconds off the real time
/// (within 1 s): else libfaketime did not take effect and a test would silently run on the real
/// clock. `who` names the server in the failure.
pub fn assert_clock_offset(c: &mut Client, wanted_s: f64, who: &str) {
    let server: f64 = c.scalar("SELECT extract(epoch FROM clock_timestamp())::float8");
    let real =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let offset = server - real;
    assert!(
        (offset - wanted_s).abs() < 1.0,
        "{who}'s clock is {offset:.3} s off the real time, not {wanted_s} s: \
         libfaketime did not take effect"
    );
}

/// The postmaster of `data` is running (a `kill -9` leaves its pid file behind).
fn postmaster_alive(data: &Path) -> bool {
    live_postmaster_pid(data).is_some()
}

/// The postmaster of a data directory, if it is alive.
pub fn live_postmaster_pid(data: &Path) -> Option<i32> {
    let line = first_line_of(&data.join("postmaster.pid"))?;
    let pid = line.trim();
    is_live_postmaster(pid).then(|| pid.parse().ok())?
}

/// Whether `pid` is a live postgres process: a process, not a thread (a thread's id opens
/// /proc/ID too, and ids come round again at pid_max, 32768 here: a killed server's pid file
/// once named a thread of the test itself), and a postgres one.
fn is_live_postmaster(pid: &str) -> bool {
    let Ok(pid) = pid.parse::<u32>() else { return false };
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
    field("Tgid:") == Some(&pid.to_string()) && field("Name:") == Some("postgres")
}

fn signal(pid: i32, sig: &str) {
    let out = Command::new("kill").args([format!("-{sig}"), pid.to_string()]).output().unwrap();
    check(out, &format!("kill -{sig} {pid}"));
}

fn children_of(pid: i32) -> Vec<i32> {
    let out = Command::new("pgrep").args(["-P", &pid.to_string()]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().map(|l| l.trim().parse().unwrap()).collect()
}

/// A field of `/proc/PID/status` in kB (`VmHWM`, `VmRSS`, `VmData`, `RssAnon`); `None` once the
/// process is gone.
pub fn proc_status_kb(pid: i32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line =
        status.lines().find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Makes the planner run every parallel-safe query in a parallel worker (the setting was renamed
/// in PostgreSQL 16; the suites run against any supported major).
pub fn force_parallel(c: &mut Client) {
    let version: i32 = c.scalar("SELECT current_setting('server_version_num')::int");
    let name = if version < 160000 { "force_parallel_mode" } else { "debug_parallel_query" };
    c.batch_execute(&format!(
        "SET {name} = on; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0"
    ))
    .unwrap();
}

/// SQLSTATE and message of a failed call (the client's error when the server sent none).
pub fn why(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}

/// An error a server sent, as a test looks at it: every part, named (0.5.0's helpers returned
/// tuples whose third part was the hint for some and the detail for others).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerError {
    /// The SQLSTATE.
    pub code: String,
    pub message: String,
    /// "" when there is none.
    pub detail: String,
    /// "" when there is none.
    pub hint: String,
}

/// The error of a failed statement; a panic if it is not the server's (a broken connection).
pub fn db_error(e: &postgres::Error) -> ServerError {
    let db = e.as_db_error().unwrap_or_else(|| panic!("not a server error: {e}"));
    ServerError {
        code: db.code().code().to_string(),
        message: db.message().to_string(),
        detail: db.detail().unwrap_or_default().to_string(),
        hint: db.hint().unwrap_or_default().to_string(),
    }
}

/// Runs `sql` expecting an error, and returns it.
pub fn expect_error(client: &mut Client, sql: &str) -> ServerError {
    match client.batch_execute(sql) {
        Ok(()) => panic!("{sql} succeeded but should have failed"),
        Err(e) => db_error(&e),
    }
}

/// `sql` fails with `error`, its SQLSTATE and exact message as "CODE: message"; returns the
/// hint.
#[track_caller]
pub fn expect_error_is(client: &mut Client, sql: &str, error: &str) -> String {
    let ServerError { code: state, message: got, hint, .. } = expect_error(client, sql);
    assert_eq!(format!("{state}: {got}"), error, "{sql}");
    hint
}

/// `sql` fails with `error` ("CODE: message", as `expect_error_is`), and a hint that says
/// `hint_part`.
#[track_caller]
pub fn expect_refusal(client: &mut Client, sql: &str, error: &str, hint_part: &str) {
    let hint = expect_error_is(client, sql, error);
    assert!(hint.contains(hint_part), "{sql}: the hint does not say {hint_part:?}: {hint}");
}

/// The wait event pg_snowflake's own event `own` shows as in `pg_stat_activity` (wait_event_type
/// `Extension`) on the major under test: its own name from 17 on, where extensions name their
/// events, `Extension` on 15 and 16 (src/postgres/wait_event.rs).
pub fn wait_event_of(own: &str) -> String {
    let major: u32 = major_under_test().parse().expect("a major");
    if major >= 17 { own } else { "Extension" }.to_string()
}

/// `snowflake_next()` once.
pub fn next_id(c: &mut Client) -> i64 {
    c.scalar("SELECT snowflake_next()")
}

/// `(time in Unix ms, worker id, sequence)` of an id, decoded by the server's layout.
pub fn decode_id(c: &mut Client, id: i64) -> (i64, i32, i32) {
    let row = c
        .query_one(
            "SELECT (extract(epoch FROM ts) * 1000)::int8, worker_id, sequence
             FROM snowflake_decode($1)",
            &[&id],
        )
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

/// This machine's clock, in Unix milliseconds.
pub fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

pub fn ids(client: &mut Client, sql: &str) -> Vec<i64> {
    client.query(sql, &[]).unwrap().iter().map(|r| r.get::<_, i64>(0)).collect()
}

/// The ids `sql` returns to each of `clients`, all running it at once, one thread each.
pub fn ids_at_once(clients: &mut [Client], sql: &str) -> Vec<Vec<i64>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> =
            clients.iter_mut().map(|c| scope.spawn(move || ids(c, sql))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

pub fn assert_strictly_increasing(ids: &[i64], what: &str) {
    for (i, pair) in ids.windows(2).enumerate() {
        assert!(pair[1] > pair[0], "{what}: id #{} {} is not above {}", i + 1, pair[1], pair[0]);
    }
}

/// The promise across a crash, a restart or a promotion: the ids made after `event` start above
/// every id of `before`, and strictly increase.
pub fn assert_above_all(before: &[i64], after: &[i64], event: &str) {
    let highest = *before.iter().max().expect("ids before");
    assert!(
        after[0] > highest,
        "the first id after {event}, {}, is not above the highest before it, {highest}",
        after[0]
    );
    assert_strictly_increasing(after, &format!("after {event}"));
}

/// The one value of a statement that returns one row: `c.scalar::<i64>("SELECT ...")`, for the
/// `query_one(sql, &[]).unwrap().get(0)` the suites write hundreds of times. Panics, as the
/// suites want, on an error or on a row count other than one.
pub trait Scalar {
    /// The one value of the one row `sql` returns.
    fn scalar<T: for<'a> postgres::types::FromSql<'a>>(&mut self, sql: &str) -> T;
    /// The same, with parameters.
    fn scalar_with<T: for<'a> postgres::types::FromSql<'a>>(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> T;
    /// The first column of every row `sql` returns.
    fn column<T: for<'a> postgres::types::FromSql<'a>>(&mut self, sql: &str) -> Vec<T>;
}

impl Scalar for Client {
    fn scalar<T: for<'a> postgres::types::FromSql<'a>>(&mut self, sql: &str) -> T {
        self.scalar_with(sql, &[])
    }

    fn scalar_with<T: for<'a> postgres::types::FromSql<'a>>(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> T {
        self.query_one(sql, params).unwrap_or_else(|e| panic!("{sql}: {}", why(&e))).get(0)
    }

    fn column<T: for<'a> postgres::types::FromSql<'a>>(&mut self, sql: &str) -> Vec<T> {
        let rows = self.query(sql, &[]).unwrap_or_else(|e| panic!("{sql}: {}", why(&e)));
        rows.iter().map(|r| r.get(0)).collect()
    }
}

/// `snowflake_stats()` of the server.
pub fn stats(c: &mut Client) -> serde_json::Value {
    let text: String = c.scalar("SELECT snowflake_stats()::text");
    serde_json::from_str(&text).unwrap()
}

/// Polls until `snowflake_next()` works and returns the id (a registry member's first).
pub fn first_id(c: &mut Client, within: Duration) -> i64 {
    let mut id = 0;
    poll(within, Duration::from_millis(50), || match c.query_one("SELECT snowflake_next()", &[]) {
        Ok(row) => {
            id = row.get(0);
            Ok(())
        }
        Err(e) => Err(format!("snowflake_next(): {:?}", db_error(&e))),
    });
    id
}

/// The worker id inside `id`, in the server's layout.
pub fn worker_id_of(c: &mut Client, id: i64) -> i32 {
    c.query_one("SELECT (snowflake_decode($1)).worker_id", &[&id]).unwrap().get(0)
}

/// `snowflake_stats() -> 'registry'` of a registry member.
pub fn registry_stats(c: &mut Client) -> serde_json::Value {
    stats(c)["registry"].clone()
}

/// The error `snowflake_next()` gives now.
pub fn next_error(c: &mut Client) -> ServerError {
    let e = c.query_one("SELECT snowflake_next()", &[]).expect_err("snowflake_next() should fail");
    db_error(&e)
}

/// Polls `sql` every `every`, for 30 s at most, until it fails with a server error that
/// `wanted` takes, and returns it; while it succeeds the poll says `still`, and another error
/// is polled again.
pub fn wait_for_error(
    c: &mut Client,
    sql: &str,
    every: Duration,
    still: &str,
    wanted: impl Fn(&ServerError) -> bool,
) -> ServerError {
    let mut said = ServerError::default();
    poll(Duration::from_secs(30), every, || match c.query_one(sql, &[]) {
        Ok(_) => Err(still.to_string()),
        Err(e) => {
            let error = db_error(&e);
            if wanted(&error) {
                said = error;
                Ok(())
            } else {
                Err(format!("{error:?}"))
            }
        }
    });
    said
}

/// Polls until `snowflake_next()` fails with 55000 and `detail_part` in its message or detail.
pub fn wait_for_refusal(c: &mut Client, part: &str, within: Duration) -> (String, String) {
    let mut seen = (String::new(), String::new());
    poll(within, Duration::from_millis(100), || {
        match c.query_one("SELECT snowflake_next()", &[]) {
            Ok(_) => Err("snowflake_next() still works".into()),
            Err(e) => {
                let (code, message, detail) = {
                    let db = e.as_db_error().ok_or(format!("{e}"))?;
                    (
                        db.code().code().to_string(),
                        db.message().to_string(),
                        db.detail().unwrap_or_default().to_string(),
                    )
                };
                if code == "55000" && (message.contains(part) || detail.contains(part)) {
                    seen = (message, detail);
                    Ok(())
                } else {
                    Err(format!("{code}: {message} ({detail})"))
                }
            }
        }
    });
    seen
}

/// Durable writes of a new mark since the server started.
pub fn renewals(c: &mut Client) -> u64 {
    stats(c)["lease"]["renewals"].as_u64().unwrap()
}

/// Ids from `c`, in batches, until the server has renewed its lease `n` more times (renewals
/// come about once a second under load): what a standby or a crash must then carry over is
/// marks written while this ran, not only the one the generator started with.
pub fn ids_through_renewals(c: &mut Client, n: u64) -> Vec<i64> {
    let until = renewals(c) + n;
    let mut all = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while renewals(c) < until {
        assert!(Instant::now() < deadline, "no {n} renewals within 60 s");
        all.extend(ids(c, "SELECT snowflake_next() FROM generate_series(1, 20000)"));
    }
    all
}

/// Server processes sent SIGKILL. A process waiting for a file system request that its daemon
/// already took (a held fsync on faultfs) dies only once the request ends: a power cut ends it
/// by stopping the daemon before it waits here.
#[must_use = "the processes may still run: wait() for them"]
pub struct Killed {
    pids: Vec<i32>,
}

impl Killed {
    pub fn wait(self) {
        poll(Duration::from_secs(30), Duration::from_millis(20), || {
            match self.pids.iter().find(|p| Path::new(&format!("/proc/{p}")).exists()) {
                None => Ok(()),
                Some(p) => Err(format!("process {p} of postmaster {} did not die", self.pids[0])),
            }
        });
    }
}

/// Calls `step` every `every` until it returns `Ok`; after `within`, fails with the last `Err`,
/// which says what was awaited and what there was instead.
pub fn poll(within: Duration, every: Duration, mut step: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + within;
    loop {
        let why = match step() {
            Ok(()) => return,
            Err(why) => why,
        };
        assert!(Instant::now() < deadline, "after {within:?}: {why}");
        std::thread::sleep(every);
    }
}

/// Makes the primary wait for a synchronous standby (`synchronous_standby_names = '*'`) and
/// waits until its one standby is synchronous.
pub fn make_synchronous(primary: &mut Client) {
    primary.batch_execute("ALTER SYSTEM SET synchronous_standby_names = '*'").unwrap();
    primary.batch_execute("SELECT pg_reload_conf()").unwrap();
    wait_for_one_synchronous_standby(primary);
}

/// Waits until the server of `primary` has exactly one synchronous standby.
pub fn wait_for_one_synchronous_standby(primary: &mut Client) {
    poll(Duration::from_secs(60), Duration::from_millis(50), || {
        let sync: i64 =
            primary.scalar("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'");
        (sync == 1).then_some(()).ok_or(format!("{sync} synchronous standbys, not one"))
    });
}

/// `snowflake_next()` through `c`, on `cluster` made by a pg_upgrade that did not carry the old
/// cluster's mark over, is refused (55000, with `hint_part` in the hint); settled as the hint
/// says (the state file deleted, the server restarted), ids come.
pub fn refused_until_the_state_file_is_deleted(cluster: &Cluster, c: &mut Client, hint_part: &str) {
    expect_refusal(
        c,
        "SELECT snowflake_next()",
        "55000: the snowflake mark of the cluster this one was upgraded from is missing",
        hint_part,
    );
    cluster.stop("fast");
    std::fs::remove_file(cluster.data().join("pg_snowflake.state")).unwrap();
    cluster.start();
    cluster.connect().query_one("SELECT snowflake_next()", &[]).unwrap();
}

/// Waits until the standby has replayed everything the primary flushed so far.
pub fn wait_for_replay(primary: &mut Client, standby: &mut Client) {
    let target: String = primary.scalar("SELECT pg_current_wal_flush_lsn()::text");
    poll(Duration::from_secs(60), Duration::from_millis(50), || {
        let caught_up: bool = standby
            .query_one("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", &[&target])
            .unwrap()
            .get(0);
        caught_up.then_some(()).ok_or_else(|| format!("the standby did not replay up to {target}"))
    });
}

/// ISO 8601 with microseconds, in UTC, of Unix microseconds (proleptic Gregorian).
pub fn iso_us(us: i64) -> String {
    let (days, rest) = (us.div_euclid(86_400_000_000), us.rem_euclid(86_400_000_000));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:06}+00",
        rest / 3_600_000_000,
        rest / 60_000_000 % 60,
        rest / 1_000_000 % 60,
        rest % 1_000_000
    )
}
