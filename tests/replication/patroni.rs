//! Failover under Patroni: an etcd, and two Patroni members that
//! preload pg_snowflake with one worker id (they are never primary at once) in Patroni's
//! synchronous mode, all from the cluster-wide configuration that docs/many-servers.md shows
//! (its ```yaml patroni block, used as written). The leader's clock runs 30 s
//! ahead (libfaketime, through a wrapper Patroni starts as its `postgres`). Writers insert
//! through `DEFAULT snowflake_next()` over a multi-host connection string; the leader's machine
//! fails (its Patroni and its postmaster get SIGKILL); Patroni promotes the synchronous replica
//! once the leader key expires; the writers reconnect, and every id of the new leader is above
//! every id the old one acknowledged, with no duplicate key and no acknowledged row lost. Then
//! the old leader's Patroni starts again: it rejoins as a replica (pg_rewind), where
//! `snowflake_next()` is refused.
//!
//! Majors: 17. What Patroni does to a server (promote, pg_rewind) is PostgreSQL's own
//! failover, which tests/replication/standby.rs and sync_standby.rs (and pg_auto_failover on 15)
//! test on every major; what this suite adds is the recipe of docs/many-servers.md run by a real
//! engine. On 17, the server built with assertions.
#![cfg(not(feature = "pg_test"))]

use common::failover::{check_failover, check_rejoined, write_through_failover, ORDERS};
use common::*;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use testkit as common;

/// Where tests/clients/install.sh (run by `make test`'s setup) puts Patroni.
const PATRONI: &str = "/opt/pg_snowflake-tests/patroni/bin/patroni";

/// How far the first leader's clock runs ahead: more than the failover takes (about 25 s with
/// the timings below), so that without the WAL-logged lease the new leader's first ids would
/// be below the old leader's last ones. snowflake.max_drift is raised to cover it.
const M1_AHEAD_S: u32 = 30;

/// An etcd and two Patroni members (m1, m2), each in its own process group.
struct Patroni {
    dir: PathBuf,
    /// The `bootstrap:` section of every member's configuration.
    bootstrap: String,
    etcd: Child,
    members: Vec<(String, Option<Child>)>,
    pg_ports: [u16; 2],
    api_ports: [u16; 2],
}

impl Patroni {
    /// An etcd and two configured members, in scratch directory `name`, with `bootstrap`.
    fn start(name: &str, bootstrap: String) -> Patroni {
        assert!(
            Path::new(PATRONI).exists(),
            "{PATRONI} is missing: run tests/clients/install.sh (make test does)"
        );
        assert!(
            Path::new("/usr/bin/etcd").exists(),
            "etcd is missing: apt-get install etcd-server (make test does)"
        );
        let pg_config_path = default_pg_config();
        let so = pg_config(&pg_config_path, "--pkglibdir").join("pg_snowflake.so");
        assert!(so.exists(), "run `make install` first");
        let dir = private_scratch_dir(name);
        let (client, peer) = (free_port(), free_port());
        let log = fs::File::create(dir.join("etcd.log")).unwrap();
        let etcd = Command::new("/usr/bin/etcd")
            .args(["--name", "etcd", "--data-dir"])
            .arg(dir.join("etcd"))
            .arg(format!("--listen-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--advertise-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!("--initial-cluster=etcd=http://127.0.0.1:{peer}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap();
        let mut p = Patroni {
            dir,
            bootstrap,
            etcd,
            members: vec![],
            pg_ports: [free_port(), free_port()],
            api_ports: [free_port(), free_port()],
        };
        poll(Duration::from_secs(30), Duration::from_millis(100), || {
            http_get(client, "/health")
                .filter(|body| body.contains("true"))
                .map(|_| ())
                .ok_or_else(|| format!("etcd is not healthy\n{}", p.logs()))
        });
        let bindir = pg_config(&pg_config_path, "--bindir");
        for (i, name) in ["m1", "m2"].iter().enumerate() {
            p.configure(name, i, &bindir, client);
        }
        p
    }

    /// Started with m1 leading and m2 its replica; with their PostgreSQL ports.
    fn led_by_m1(name: &str, bootstrap: String) -> (Patroni, u16, u16) {
        let mut p = Patroni::start(name, bootstrap);
        p.run("m1");
        p.wait_until_it_leads("m1", Duration::from_secs(90), "m1 never led");
        p.run("m2");
        p.wait_for("m2", "replica", Duration::from_secs(120));
        p.wait_for("m1", "primary", Duration::from_secs(60));
        let (p1, p2) = (p.port("m1"), p.port("m2"));
        (p, p1, p2)
    }

    /// Patroni's configuration of member `name`; m1's `postgres` is a wrapper that runs the
    /// server with its clock ahead.
    fn configure(&mut self, name: &str, i: usize, bindir: &Path, etcd_port: u16) {
        let postgres = if name == "m1" {
            let wrapper = self.dir.join("postgres-ahead");
            files::create_new_mode(
                &wrapper,
                format!(
                    "#!/bin/sh\nexport LD_PRELOAD={} FAKETIME=+{M1_AHEAD_S}s \
                     FAKETIME_DONT_FAKE_MONOTONIC=1\nexec {} \"$@\"\n",
                    faketime_lib(),
                    bindir.join("postgres").display()
                )
                .as_bytes(),
                0o755,
            )
            .unwrap();
            wrapper
        } else {
            bindir.join("postgres")
        };
        let yaml = format!(
            r#"scope: snowflake
name: {name}
log:
  level: INFO
restapi:
  listen: 127.0.0.1:{api}
  connect_address: 127.0.0.1:{api}
etcd3:
  hosts: 127.0.0.1:{etcd_port}
{bootstrap}postgresql:
  listen: 127.0.0.1:{port}
  connect_address: 127.0.0.1:{port}
  data_dir: {data}
  bin_dir: {bindir}
  bin_name:
    postgres: {postgres}
  pgpass: {dir}/{name}.pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
    rewind:
      username: postgres
  parameters:
    unix_socket_directories: '{dir}'
    snowflake.max_drift: 120s
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
"#,
            bootstrap = self.bootstrap,
            api = self.api_ports[i],
            port = self.pg_ports[i],
            data = self.dir.join(name).display(),
            bindir = bindir.display(),
            postgres = postgres.display(),
            dir = self.dir.display(),
        );
        files::write(&self.dir.join(format!("{name}.yml")), yaml).unwrap();
        owned_by_postgres_recursively(&self.dir);
        self.members.push((name.to_string(), None));
    }

    /// Starts (or starts again) the Patroni of `name`, logging to `<name>.log`.
    fn run(&mut self, name: &str) {
        let log = fs::File::options()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))
            .unwrap();
        let child = as_postgres(Path::new(PATRONI), &[])
            .arg(self.dir.join(format!("{name}.yml")))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap();
        let member = self.members.iter_mut().find(|(n, _)| n == name).unwrap();
        member.1 = Some(child);
    }

    fn port(&self, name: &str) -> u16 {
        self.pg_ports[self.index(name)]
    }

    fn index(&self, name: &str) -> usize {
        self.members.iter().position(|(n, _)| n == name).unwrap()
    }

    /// What Patroni's REST API of `name` says about the member: its role and state. Panics with
    /// the logs if that member's Patroni has exited (a bad configuration ends it at once), so
    /// that a wait does not run out its whole time for nothing.
    fn status(&self, name: &str) -> String {
        if let Some(child) = &self.members[self.index(name)].1 {
            let stat = fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
            let state = stat.rsplit_once(") ").map(|(_, rest)| &rest[..1]);
            assert!(
                matches!(state, Some(s) if s != "Z" && s != "X"),
                "the Patroni of {name} has exited\n{}",
                self.logs()
            );
        }
        http_get(self.api_ports[self.index(name)], "/patroni").unwrap_or_default()
    }

    /// Waits until `name` says it is the primary, streaming to a replica or not yet; `what`
    /// says what did not happen, if it does not within `within`.
    fn wait_until_it_leads(&self, name: &str, within: Duration, what: &str) {
        poll(within, Duration::from_millis(300), || {
            self.status(name)
                .contains("\"role\": \"primary\"")
                .then_some(())
                .ok_or_else(|| format!("{what}\n{}", self.logs()))
        });
    }

    /// Waits until `name` runs as `role` ("primary" or "replica") and is streaming (a replica)
    /// or has a synchronous replica (a primary).
    fn wait_for(&self, name: &str, role: &str, within: Duration) {
        poll(within, Duration::from_millis(300), || {
            let status = self.status(name);
            let ok = status.contains(&format!("\"role\": \"{role}\""))
                && status.contains("\"state\": \"running\"")
                && match role {
                    // Patroni only promotes the member its /sync key names; it writes the key
                    // a loop after PostgreSQL reports the standby as synchronous.
                    "primary" => {
                        self.sync_standbys(name) == 1
                            && http_get(self.api_ports[self.index(name)], "/cluster")
                                .is_some_and(|c| c.contains("\"role\": \"sync_standby\""))
                    }
                    _ => status.contains("\"replication_state\": \"streaming\""),
                };
            ok.then_some(())
                .ok_or_else(|| format!("{name} is not a running {role}: {status}\n{}", self.logs()))
        });
    }

    fn sync_standbys(&self, name: &str) -> i64 {
        Client::connect(&node_conninfo(self.port(name)), NoTls)
            .and_then(|mut c| {
                c.query_one(
                    "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'",
                    &[],
                )
            })
            .map(|r| r.get(0))
            .unwrap_or(0)
    }

    /// The machine of `name` fails: its Patroni's process group and its postmaster get SIGKILL.
    /// Returns the postmaster's pid.
    fn kill_9(&mut self, name: &str) -> i32 {
        let data = self.dir.join(name);
        let postmaster = live_postmaster_pid(&data).expect("the member's server runs");
        let i = self.index(name);
        if let Some(mut child) = self.members[i].1.take() {
            let _ = Command::new("kill").args(["-9", "--", &format!("-{}", child.id())]).status();
            let _ = child.wait();
        }
        let _ = Command::new("kill").args(["-9", &postmaster.to_string()]).status();
        postmaster
    }

    fn logs(&self) -> String {
        ["etcd", "m1", "m2"]
            .iter()
            .map(|n| {
                let log = files::read_text(&self.dir.join(format!("{n}.log")));
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                format!(
                    "--- {n}.log (last lines) ---\n{}\n",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect()
    }
}

impl Drop for Patroni {
    fn drop(&mut self) {
        for (name, child) in self.members.iter_mut() {
            if let Some(child) = child.as_mut() {
                let _ =
                    Command::new("kill").args(["-9", "--", &format!("-{}", child.id())]).status();
                let _ = child.wait();
            }
            if let Some(pid) = live_postmaster_pid(&self.dir.join(name.as_str())) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
        let _ = self.etcd.kill();
        let _ = self.etcd.wait();
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// The `bootstrap:` section of docs/many-servers.md (its ```yaml patroni block), as a user copies
/// it, with Patroni's timings shortened so that a failover takes seconds: `ttl` 20 s (default
/// 30), `loop_wait` 2 s (10), `retry_timeout` 5 s (10).
fn bootstrap_from_guide(info: &str) -> String {
    let guide =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/many-servers.md"))
            .unwrap();
    let block = guide
        .split(&format!("```yaml {info}\n"))
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap_or_else(|| panic!("docs/many-servers.md has a ```yaml {info} block"));
    assert!(
        block.starts_with("bootstrap:\n  dcs:\n"),
        "the guide's block starts with bootstrap.dcs:\n{block}"
    );
    block.replacen("  dcs:\n", "  dcs:\n    ttl: 20\n    loop_wait: 2\n    retry_timeout: 5\n", 1)
}

/// A plain HTTP GET on 127.0.0.1, enough for etcd's and Patroni's status pages: the body, or
/// `None` if nothing answers.
fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    s.read_to_string(&mut response).ok()?;
    response.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

fn owned_by_postgres_recursively(dir: &Path) {
    if running_as_root() {
        chown_to_postgres("-R", dir);
    }
}

fn node_conninfo(port: u16) -> String {
    format!("host=127.0.0.1 port={port} user=postgres dbname=postgres connect_timeout=5")
}

#[test]
fn patroni_promotes_the_synchronous_replica_and_its_ids_are_above_the_old_leaders() {
    // Step 1: m1 bootstraps the cluster and leads; m2 follows as its synchronous replica.
    let (mut p, p1, p2) = Patroni::led_by_m1("patroni", bootstrap_from_guide("patroni"));

    // Step 2: the table, on m1, whose clock must be ahead (else the test proves nothing).
    let mut leader = Client::connect(&node_conninfo(p1), NoTls).unwrap();
    leader.batch_execute(&format!("CREATE EXTENSION pg_snowflake; {ORDERS}")).unwrap();
    assert_clock_offset(&mut leader, f64::from(M1_AHEAD_S), "m1");
    drop(leader);

    // Step 3: writers through both hosts, and only the one that accepts writes; once each has
    // 300 rows on m1, m1's machine fails and Patroni promotes m2.
    let uri = format!(
        "host=127.0.0.1,127.0.0.1 port={p1},{p2} user=postgres dbname=postgres \
         target_session_attrs=read-write connect_timeout=2"
    );
    let mut killed = None;
    let started = std::time::Instant::now();
    let writes = write_through_failover(&uri, 3, 300, 200, p2, Duration::from_secs(180), || {
        killed = Some(p.kill_9("m1"))
    });
    eprintln!(
        "patroni: {} ids acknowledged; the writers got going on m2 {:.1} s after m1 failed",
        writes.acked.len(),
        started.elapsed().as_secs_f64()
    );
    let killed = killed.unwrap();
    assert!(!Path::new(&format!("/proc/{killed}")).exists(), "m1's postmaster survived SIGKILL");
    let mut new = Client::connect(&node_conninfo(p2), NoTls).unwrap();
    let above = check_failover(&writes, p1, p2, &mut new);

    // Step 4: m1's Patroni starts again; m1 rejoins as m2's replica (rewound if it had gone
    // ahead), refuses ids there, and the writers' connection string still reaches m2.
    p.run("m1");
    p.wait_for("m1", "replica", Duration::from_secs(120));
    check_rejoined(&node_conninfo(p1), &uri, p2, above);
}

/// The members of a Patroni cluster lease their worker id from a registry, as the guide's
/// ```yaml patroni-registry block configures them (`snowflake.registry` in Patroni's
/// cluster-wide parameters). They share one system identifier, but each runs its own data
/// directory: the replica that Patroni promotes after a `kill -9` of the leader, whose lease
/// still runs, takes a worker id of its own (it cannot tell a dead leader from a live one, as in
/// a split brain) and makes ids above the old leader's; the old leader rejoins as a replica,
/// which refuses ids.
#[test]
fn a_patroni_failover_gives_the_new_leader_a_worker_id_of_its_own() {
    let hub = Cluster::start_new("patroni_registry_hub", &[]);
    hub.connect_ext()
        .batch_execute(
            "CREATE ROLE fleet LOGIN;
             GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_hold TO fleet;",
        )
        .unwrap();
    let bootstrap = bootstrap_from_guide("patroni-registry")
        .replace("host=registry port=5432", &format!("host=127.0.0.1 port={}", hub.port));
    assert!(bootstrap.contains(&format!("port={}", hub.port)), "{bootstrap}");
    let (mut p, p1, p2) = Patroni::led_by_m1("patroni_registry", bootstrap);
    let mut leader = Client::connect(&node_conninfo(p1), NoTls).unwrap();
    leader.batch_execute("CREATE EXTENSION pg_snowflake").unwrap();
    let mut last = 0i64;
    poll(Duration::from_secs(60), Duration::from_millis(100), || {
        leader
            .query_one("SELECT max(snowflake_next()) FROM generate_series(1, 1000)", &[])
            .map(|r| last = r.get(0))
            .map_err(|e| format!("{e:?}"))
    });
    let worker: i32 =
        leader.query_one("SELECT (snowflake_decode($1)).worker_id", &[&last]).unwrap().get(0);
    let holders: i64 = hub
        .connect()
        .scalar("SELECT count(DISTINCT system_identifier) FROM snowflake.snowflake_registry");
    assert_eq!(holders, 1, "the registry knows the Patroni cluster as one");
    drop(leader);

    p.kill_9("m1");
    p.wait_until_it_leads("m2", Duration::from_secs(120), "m2 was not promoted");
    let mut new = Client::connect(&node_conninfo(p2), NoTls).unwrap();
    let mut first = 0i64;
    poll(Duration::from_secs(60), Duration::from_millis(100), || {
        new.query_one("SELECT snowflake_next()", &[])
            .map(|r| first = r.get(0))
            .map_err(|e| format!("{e:?}"))
    });
    let again: i32 =
        new.query_one("SELECT (snowflake_decode($1)).worker_id", &[&first]).unwrap().get(0);
    println!("the old leader's worker id {worker}, the new leader's {again}");
    assert_ne!(again, worker, "the new leader took the lease the old one still held");
    assert!(first > last, "{first} is not above the old leader's {last}");
    poll(Duration::from_secs(60), Duration::from_millis(200), || {
        let s = stats(&mut new);
        (s["registry"]["source"] == "leased")
            .then_some(())
            .ok_or(format!("the new leader did not renew its lease: {s}"))
    });

    p.run("m1");
    p.wait_for("m1", "replica", Duration::from_secs(120));
    let mut old = Client::connect(&node_conninfo(p1), NoTls).unwrap();
    let ServerError { code: state, .. } = expect_error(&mut old, "SELECT snowflake_next()");
    assert_eq!(state, "25006", "the old leader, now a replica, refuses ids");
}
