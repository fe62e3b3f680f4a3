//! Failover under a real HA engine: pg_auto_failover (a monitor and two nodes, synchronous
//! replication, as its defaults set up). The primary's clock runs two minutes ahead. Writers
//! insert through `DEFAULT snowflake_next()`, the primary's machine fails (its keeper and its postmaster are killed with SIGKILL), the
//! monitor promotes the secondary, the writers reconnect through a multi-host connection
//! string, and every id of the new primary is above every id the old one handed out, with no
//! duplicate key and no acknowledged row lost. Then the old primary rejoins as a secondary.
//!
//! Majors: 15. Debian packages pg_auto_failover for PostgreSQL 15 only.
#![cfg(not(feature = "pg_test"))]

use common::failover::{check_failover, check_rejoined, write_through_failover, ORDERS};
use common::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;
use testkit as common;

/// A monitor and its nodes, each run by its own `pg_autoctl run` in its own process group.
struct Formation {
    dir: PathBuf,
    bindir: PathBuf,
    monitor_port: u16,
    monitor_uri: String,
    keepers: Mutex<Vec<(String, Child)>>,
}

impl Formation {
    fn pg_autoctl(&self) -> Command {
        self.pg_autoctl_with(&[])
    }

    fn pg_autoctl_with(&self, extra_env: &[(String, String)]) -> Command {
        let mut env = [
            ("XDG_CONFIG_HOME", self.dir.join("config")),
            ("XDG_DATA_HOME", self.dir.join("share")),
            // The servers' unix sockets, and where pg_autoctl looks for them.
            ("PG_REGRESS_SOCK_DIR", self.dir.clone()),
            ("PGHOST", self.dir.clone()),
            ("PATH", format!("{}:/usr/bin:/bin", self.bindir.display()).into()),
        ]
        .map(|(k, v)| (k.to_string(), v.display().to_string()))
        .to_vec();
        env.extend_from_slice(extra_env);
        let mut c = as_postgres(Path::new("/usr/bin/pg_autoctl"), &env);
        c.current_dir(&self.dir).stdin(Stdio::null());
        c
    }

    fn pgdata(&self, node: &str) -> PathBuf {
        self.dir.join(node)
    }

    fn create(&self, what: &[&str]) {
        check(
            self.pg_autoctl().arg("create").args(what).output().unwrap(),
            &format!("pg_autoctl create {}", what[0]),
        );
    }

    /// Starts `pg_autoctl run` for a node (or the monitor), logging to `<node>.log`; `env`
    /// reaches the keeper and the server it starts.
    fn run(&self, node: &str, env: &[(String, String)]) {
        let log = fs::File::options()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{node}.log")))
            .unwrap();
        use std::os::unix::process::CommandExt;
        let child = self
            .pg_autoctl_with(env)
            .args(["run", "--pgdata"])
            .arg(self.pgdata(node))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap();
        self.keepers.lock().unwrap().push((node.into(), child));
    }

    /// The machine of `node` fails: its keeper's process group and its postmaster get SIGKILL.
    fn kill_9(&self, node: &str) -> i32 {
        let postmaster = live_postmaster_pid(&self.pgdata(node)).expect("the node's server runs");
        let mut keepers = self.keepers.lock().unwrap();
        for (name, child) in keepers.iter_mut().filter(|(name, _)| name == node) {
            let _ = Command::new("kill").args(["-9", "--", &format!("-{}", child.id())]).status();
            let _ = child.wait();
            let _ = name;
        }
        keepers.retain(|(name, _)| name != node);
        let _ = Command::new("kill").args(["-9", &postmaster.to_string()]).status();
        postmaster
    }

    /// The monitor's view, one "name reported assigned" line per node (what `pg_autoctl show
    /// state` prints), read from its tables.
    fn states(&self) -> Vec<String> {
        let Ok(mut monitor) = Client::connect(
            &format!(
                "host=127.0.0.1 port={} user=postgres dbname=pg_auto_failover",
                self.monitor_port
            ),
            NoTls,
        ) else {
            return vec![];
        };
        monitor
            .query(
                "SELECT format('%s %s %s', nodename, reportedstate, goalstate)
                 FROM pgautofailover.node ORDER BY nodename",
                &[],
            )
            .map(|rows| rows.iter().map(|r| r.get(0)).collect())
            .unwrap_or_default()
    }

    /// Waits until every line of `want` is in the formation's state.
    fn wait_for(&self, want: &[&str], within: Duration) {
        poll(within, Duration::from_millis(300), || {
            let states = self.states();
            match want.iter().all(|w| states.iter().any(|s| s == w)) {
                true => Ok(()),
                false => Err(format!(
                    "the formation never reached {want:?}; it is {states:?}\n{}",
                    self.logs()
                )),
            }
        });
    }

    fn logs(&self) -> String {
        ["monitor", "n1", "n2"]
            .iter()
            .map(|n| {
                let log = files::read_text(&self.dir.join(format!("{n}.log")));
                format!("--- pg_autoctl {n} ---\n{log}")
            })
            .collect()
    }
}

impl Drop for Formation {
    fn drop(&mut self) {
        for (_, child) in self.keepers.lock().unwrap().iter_mut() {
            let _ =
                Command::new("kill").args(["-TERM", "--", &format!("-{}", child.id())]).status();
            let _ = child.wait();
        }
        for node in ["n1", "n2", "monitor"] {
            if let Some(pid) = live_postmaster_pid(&self.pgdata(node)) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// The command lines of running processes that contain `text`.
fn processes_mentioning(text: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
        .filter(|e| e.file_name().to_string_lossy() != me)
        .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .filter(|cmd| cmd.contains(text))
        .collect()
}

/// n1's clock runs 120 s ahead, so that its ids are ahead of n2's clock by more than the
/// failover takes (about 50 s with pg_auto_failover's default timeouts): n2 stays above them
/// only because it replayed n1's WAL-logged lease (and then borrows up to 120 s of
/// snowflake.max_drift, raised to 300 s for that). Without the lease, its first ids would be
/// about a minute below the old primary's last ones.
const N1_AHEAD_S: f64 = 120.0;

fn n1_clock() -> Vec<(String, String)> {
    [
        ("LD_PRELOAD", faketime_lib()),
        ("FAKETIME", format!("+{N1_AHEAD_S}s")),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
    ]
    .map(|(k, v)| (k.to_string(), v))
    .to_vec()
}

fn node_conninfo(port: u16) -> String {
    format!("host=127.0.0.1 port={port} user=postgres dbname=postgres")
}

/// Step 1: a monitor, and two nodes that preload pg_snowflake with worker id 1 (they are
/// never primary at once), n1 primary and n2 its synchronous secondary.
fn start_formation(p1: u16, p2: u16) -> Formation {
    let pg_config_path = default_pg_config();
    let version =
        String::from_utf8(Command::new(&pg_config_path).arg("--version").output().unwrap().stdout)
            .unwrap();
    assert!(
        version.starts_with("PostgreSQL 15."),
        "pg_auto_failover is packaged for PostgreSQL 15; PG_CONFIG names {version}"
    );
    assert!(
        Path::new("/usr/bin/pg_autoctl").exists(),
        "pg_autoctl is missing: run scripts/setup.sh test 15"
    );
    let so = pg_config(&pg_config_path, "--pkglibdir").join("pg_snowflake.so");
    assert!(so.exists(), "run `make install` first");
    let monitor_port = free_port();
    let f = Formation {
        dir: private_scratch_dir("af"),
        bindir: pg_config(&pg_config_path, "--bindir"),
        monitor_port,
        monitor_uri: format!(
            "postgres://autoctl_node@127.0.0.1:{monitor_port}/pg_auto_failover?sslmode=require"
        ),
        keepers: Mutex::new(vec![]),
    };
    let pg_ctl = f.bindir.join("pg_ctl").display().to_string();
    let common = |port: u16| {
        vec![
            "--pgport".to_string(),
            port.to_string(),
            "--hostname".into(),
            "127.0.0.1".into(),
            "--auth".into(),
            "trust".into(),
            "--ssl-self-signed".into(),
            "--pgctl".into(),
            pg_ctl.clone(),
        ]
    };
    let monitor_dir = f.pgdata("monitor").display().to_string();
    let mut args = vec!["monitor".to_string(), "--pgdata".into(), monitor_dir];
    args.extend(common(monitor_port));
    f.create(&args.iter().map(String::as_str).collect::<Vec<_>>());
    f.run("monitor", &[]);
    // Each node: created by pg_autoctl (n2 by pg_basebackup from n1, which copies n1's
    // postgresql.conf). pg_auto_failover preloads pg_stat_statements; keep it.
    for (node, port) in [("n1", p1), ("n2", p2)] {
        let pgdata = f.pgdata(node).display().to_string();
        let mut args = vec![
            "postgres".to_string(),
            "--pgdata".into(),
            pgdata,
            "--name".into(),
            node.into(),
            "--monitor".into(),
            f.monitor_uri.clone(),
        ];
        args.extend(common(port));
        f.create(&args.iter().map(String::as_str).collect::<Vec<_>>());
        if node == "n1" {
            let conf = f.pgdata(node).join("postgresql.conf");
            let mut text = files::read_to_string(&conf).unwrap();
            text.push_str(
                "shared_preload_libraries = 'pg_stat_statements,pg_snowflake'\n\
                 snowflake.worker_id = 1\n\
                 snowflake.max_drift = '300s'\n",
            );
            files::write(&conf, text).unwrap();
            f.run(node, &n1_clock());
            f.wait_for(&["n1 single single"], Duration::from_secs(60));
        } else {
            f.run(node, &[]);
        }
    }
    f.wait_for(&["n1 primary primary", "n2 secondary secondary"], Duration::from_secs(120));
    f
}

/// Step 2: the table, on n1, whose clock must be ahead (else the test proves nothing) and which
/// must wait for n2 (synchronous replication, as pg_auto_failover sets it up).
fn prepare_primary(p1: u16) {
    let mut primary = Client::connect(&node_conninfo(p1), NoTls).unwrap();
    primary.batch_execute(&format!("CREATE EXTENSION pg_snowflake; {ORDERS}")).unwrap();
    assert_clock_offset(&mut primary, N1_AHEAD_S, "n1");
    let sync: String = primary.scalar("SHOW synchronous_standby_names");
    assert!(!sync.is_empty(), "pg_auto_failover did not set up synchronous replication");
}

/// Step 4: the old primary comes back; pg_auto_failover rewinds it and it follows n2, where it
/// refuses ids, and the writers' connection string still reaches n2.
fn rejoin_old_primary(f: &Formation, formation_uri: &str, p1: u16, p2: u16, above: i64) {
    f.run("n1", &n1_clock());
    f.wait_for(&["n1 secondary secondary", "n2 primary primary"], Duration::from_secs(120));
    check_rejoined(&node_conninfo(p1), formation_uri, p2, above);
}

#[test]
fn pg_auto_failover_promotes_the_secondary_and_its_ids_are_above_the_old_primarys() {
    let (p1, p2) = (free_port(), free_port());
    let f = start_formation(p1, p2);
    prepare_primary(p1);

    // Step 3: writers through both hosts, and only the one that accepts writes; once each has
    // 300 rows on n1, n1's machine fails and the monitor promotes n2.
    let formation_uri = format!(
        "host=127.0.0.1,127.0.0.1 port={p1},{p2} user=postgres dbname=postgres \
         target_session_attrs=read-write connect_timeout=2"
    );
    let mut killed = None;
    let writes =
        write_through_failover(&formation_uri, 3, 300, 200, p2, Duration::from_secs(180), || {
            killed = Some(f.kill_9("n1"))
        });
    let killed = killed.unwrap();
    assert!(!Path::new(&format!("/proc/{killed}")).exists(), "n1's postmaster survived SIGKILL");
    let n1_dir = f.pgdata("n1").display().to_string();
    assert_eq!(processes_mentioning(&n1_dir), Vec::<String>::new());
    let states = f.states();
    assert!(
        states.iter().any(|s| s.starts_with("n2 ") && s.contains("primary")),
        "n2 was not promoted: {states:?}"
    );
    assert!(writes.ids_of(p1).len() >= 900);
    let mut n2 = Client::connect(&node_conninfo(p2), NoTls).unwrap();
    let newest = check_failover(&writes, p1, p2, &mut n2);

    rejoin_old_primary(&f, &formation_uri, p1, p2, newest);
}
