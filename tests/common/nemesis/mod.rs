//! The nemesis: a fleet of real servers on this machine, clients that record every answer, faults
//! injected on a schedule drawn from a seed (`schedule`), and a checker over the whole history
//! (`history`), in the way Jepsen tests databases: no id acknowledged twice, none backwards, none
//! lost, whatever overlaps.
//!
//! The fleet: a registry (a primary and its synchronous standby; members reach both through
//! proxies of their own, so that a member's link can be cut or slowed alone), four members that
//! lease their worker ids from it with the shortest lease (10 s, renewed every 3.3 s, so leases
//! run out during a run): m1; m2, whose data directory lives on faultfs (stalls, failures, power
//! cuts); m3, with a synchronous standby of its own; m4, with a fixed worker id and claims. A
//! thief, a cluster started during a freeze, asks for the frozen member's worker id. A copy of
//! m1's data directory (copied while stopped, or while running, or a standby of it promoted)
//! runs beside m1 during a copy fault. Every server has a fake clock (libfaketime), a fixed
//! offset of its own drawn from the seed (the drift between machines), and steps on top of it.

pub mod history;
pub mod schedule;

use super::faultfs::FaultFs;
use super::proxy::{Link, Proxy};
use super::rng::Rng;
use super::*;
use history::{Call, Outcome, Promotion, COPY, THIEF};
use schedule::{
    Copied, Fault, Lost, Target, COPIED_MEMBER, DISK_MEMBER, FIXED_MEMBER, MEMBERS, STANDBY_MEMBER,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The worker id of the member that does not lease one (far above those the registry hands out
/// first, from 0).
pub const FIXED_WORKER_ID: i32 = 900;

/// One server: its cluster, its clock and its offset, and for m2 the file system under it. The
/// cluster is stopped before faultfs goes (fields drop in order).
struct Server {
    cluster: Cluster,
    clock: FakeClock,
    offset_s: f64,
    fs: Option<FaultFs>,
}

impl Server {
    fn set_clock(&self, step_s: f64) {
        self.clock.set(self.offset_s + step_s);
    }

    fn port(&self) -> u16 {
        self.cluster.port
    }

    /// SIGSTOP or SIGCONT to the postmaster and every child.
    fn signal_all(&self, sig: &str) {
        if let Some(pid) = self.cluster.postmaster_pid() {
            let mut pids = vec![pid];
            pids.extend(children_of(pid));
            let _ = Command::new("kill")
                .arg(format!("-{sig}"))
                .args(pids.iter().map(i32::to_string))
                .status();
        }
    }

    fn kill(&self) {
        if live_postmaster_pid(&self.cluster.data()).is_some() {
            self.cluster.crash();
        }
    }

    fn running(&self) -> bool {
        live_postmaster_pid(&self.cluster.data()).is_some()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.signal_all("CONT");
        self.cluster.stop_if_running();
    }
}

/// A pair of a primary and its synchronous standby that may swap: the registry, and m3.
struct Pair {
    servers: [Server; 2],
    primary: usize,
}

impl Pair {
    fn primary(&self) -> &Server {
        &self.servers[self.primary]
    }

    fn standby(&self) -> &Server {
        &self.servers[1 - self.primary]
    }

    /// The primary killed, the standby promoted: returns the ports (old, new).
    fn fail_over(&mut self) -> (u16, u16) {
        let old = self.primary;
        self.servers[old].kill();
        self.servers[1 - old].cluster.promote();
        self.primary = 1 - old;
        (self.servers[old].port(), self.servers[1 - old].port())
    }

    /// The old primary back as the new one's standby: pg_rewind (which first finishes the
    /// crash recovery the kill left), recovery settings pointing at the new primary, its own
    /// port again (pg_rewind copied the new primary's configuration), a start.
    fn rewind_old(&mut self) {
        let (new, old) = (&self.servers[self.primary], &self.servers[1 - self.primary]);
        // pg_rewind reads the new timeline from the source's control file, which a promotion
        // updates only at its next checkpoint: without one it says "no rewind required", and the
        // old primary, its WAL ahead of the fork, can never follow.
        new.cluster.connect().batch_execute("CHECKPOINT").unwrap();
        let source = format!("host=127.0.0.1 port={} user=postgres dbname=postgres", new.port());
        let out = old
            .cluster
            .server_cmd("pg_rewind", &old.cluster.dir)
            .arg("-D")
            .arg(old.cluster.data())
            .arg(format!("--source-server={source}"))
            .arg("-R")
            .output()
            .unwrap();
        check(out, &format!("pg_rewind of {}", old.cluster.name));
        old.cluster.append_conf(&[&format!("port = {}", old.port())]);
        old.cluster.start();
    }
}

/// The whole fleet.
pub struct Fleet {
    registry: Pair,
    /// m1, m2 (on faultfs), m4; m3 is `standby_member`.
    members: Vec<Option<Server>>,
    standby_member: Pair,
    /// Per member, its proxies to the two registry servers.
    proxies: Vec<[Proxy; 2]>,
    thief: Server,
    /// The worker id the thief asked for last, if it runs.
    thief_wants: Option<i32>,
    /// The copy of m1 while a copy fault runs, on `copy_port`; `name` and `copies` name its
    /// directories.
    copy: Option<Server>,
    copy_port: u16,
    copies: usize,
    name: String,
    /// Where each member's clients connect (both servers of m3, read-write).
    pub client_conninfo: Vec<String>,
    pub thief_conninfo: String,
    pub copy_conninfo: String,
}

impl Fleet {
    /// Sets the fleet up; `rng` draws each server's clock offset (up to 2 s either way).
    pub fn start(name: &str, rng: &mut Rng) -> Fleet {
        let mut offset = || (rng.below(41) as f64 - 20.0) / 10.0;
        let common = [
            "wal_log_hints = on",
            "snowflake.max_drift = '10s'",
            "max_connections = 60",
            "wal_keep_size = '256MB'",
        ];
        // The registry.
        let reg_a = fake_clock_server(&format!("{name}_reg_a"), &common, offset());
        reg_a.cluster.start();
        let mut c = reg_a.cluster.connect_ext();
        c.batch_execute(
            "CREATE ROLE fleet LOGIN;
             GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_hold TO fleet;",
        )
        .unwrap();
        let reg_b = standby_of(&reg_a, &format!("{name}_reg_b"), offset());
        synchronous(&reg_a, &reg_b);
        let registry = Pair { servers: [reg_a, reg_b], primary: 0 };
        let mut proxies = vec![];
        let mut members: Vec<Option<Server>> = vec![];
        let mut client_conninfo = vec![];
        let registry_conf = |proxies: &[Proxy; 2]| {
            format!(
                "snowflake.registry = 'host=127.0.0.1,127.0.0.1 port={},{} user=fleet \
                 dbname=postgres target_session_attrs=read-write connect_timeout=2'",
                proxies[0].port, proxies[1].port
            )
        };
        let mut standby_member = None;
        for m in 0..MEMBERS {
            let pair = [
                Proxy::start(registry.servers[0].port()),
                Proxy::start(registry.servers[1].port()),
            ];
            let mut conf: Vec<String> = common.iter().map(|s| s.to_string()).collect();
            conf.push(registry_conf(&pair));
            conf.push(SHORTEST_LEASE.into());
            conf.push(if m == FIXED_MEMBER {
                format!("snowflake.worker_id = {FIXED_WORKER_ID}")
            } else {
                "snowflake.worker_id = -1".into()
            });
            if m == FIXED_MEMBER {
                conf.push("snowflake.claims_database = 'postgres'".into());
                conf.push("snowflake.claims_interval = '1s'".into());
            }
            proxies.push(pair);
            let conf: Vec<&str> = conf.iter().map(String::as_str).collect();
            let mut server = fake_clock_server(&format!("{name}_m{}", m + 1), &conf, offset());
            if m == DISK_MEMBER {
                server.fs = Some(FaultFs::serve(&server.cluster));
            }
            server.cluster.start();
            let mut c = server.cluster.connect_ext();
            c.batch_execute(
                "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), session bigint)",
            )
            .unwrap();
            if m == STANDBY_MEMBER {
                // The standby's clock 6 s behind its primary's: a promoted standby that did not
                // carry the primary's marks (WAL replay) would go on below its ids, even after
                // the seconds a promotion takes here (the kill, `pg_ctl promote`, a lease from
                // the registry, a synchronous standby back); with them its ids run 6 s and a
                // lease ahead of its clock, within max_drift (10 s). 1.5 s did not tell.
                let behind = server.offset_s - 6.0;
                let standby = standby_of(&server, &format!("{name}_m3s"), behind);
                synchronous(&server, &standby);
                client_conninfo.push(format!(
                    "host=127.0.0.1,127.0.0.1 port={},{} user=postgres dbname=postgres \
                     target_session_attrs=read-write connect_timeout=2",
                    server.port(),
                    standby.port()
                ));
                standby_member = Some(Pair { servers: [server, standby], primary: 0 });
                members.push(None);
            } else {
                client_conninfo.push(format!(
                    "host=127.0.0.1 port={} user=postgres dbname=postgres connect_timeout=2",
                    server.port()
                ));
                members.push(Some(server));
            }
        }
        // The thief: its own proxies would change nothing; it reaches the registry directly.
        let thief_conf = [
            "snowflake.max_drift = '60s'".to_string(),
            "snowflake.worker_id = -1".to_string(),
            SHORTEST_LEASE.to_string(),
            format!(
                "snowflake.registry = 'host=127.0.0.1,127.0.0.1 port={},{} user=fleet \
                 dbname=postgres target_session_attrs=read-write connect_timeout=2'",
                registry.servers[0].port(),
                registry.servers[1].port()
            ),
        ];
        let conf: Vec<&str> = thief_conf.iter().map(String::as_str).collect();
        let thief = fake_clock_server(&format!("{name}_thief"), &conf, 0.0);
        thief.cluster.start();
        thief.cluster.connect_ext();
        thief.cluster.stop("fast");
        let thief_conninfo = format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres connect_timeout=2",
            thief.port()
        );
        let copy_port = free_port();
        Fleet {
            registry,
            members,
            standby_member: standby_member.unwrap(),
            proxies,
            thief,
            thief_wants: None,
            copy: None,
            copy_port,
            copies: 0,
            name: name.to_string(),
            client_conninfo,
            thief_conninfo,
            copy_conninfo: format!(
                "host=127.0.0.1 port={copy_port} user=postgres dbname=postgres connect_timeout=2"
            ),
        }
    }

    /// The server a target names now.
    fn server(&self, t: Target) -> &Server {
        match t {
            Target::Registry => self.registry.primary(),
            Target::RegistryStandby => self.registry.standby(),
            Target::Member(m) if m == STANDBY_MEMBER => self.standby_member.primary(),
            Target::MemberStandby => self.standby_member.standby(),
            Target::Member(m) => self.members[m].as_ref().unwrap(),
        }
    }

    fn member(&self, m: usize) -> &Server {
        self.server(Target::Member(m))
    }

    /// The members a fault touches (for availability): all of them for the registry's faults.
    pub fn affected(fault: &Fault) -> Vec<usize> {
        let all: Vec<usize> = (0..MEMBERS).collect();
        match fault {
            Fault::Kill(Target::Registry | Target::RegistryStandby)
            | Fault::Clock { target: Target::Registry | Target::RegistryStandby, .. }
            | Fault::Promote(Target::Registry) => all,
            Fault::Kill(Target::MemberStandby)
            | Fault::Clock { target: Target::MemberStandby, .. } => {
                vec![STANDBY_MEMBER]
            }
            Fault::Promote(_) => vec![STANDBY_MEMBER],
            f => f
                .servers()
                .iter()
                .filter_map(|t| match t {
                    Target::Member(m) => Some(*m),
                    _ => None,
                })
                .collect(),
        }
    }

    /// Starts a fault. Returns a promotion, if it made one.
    pub fn inject(&mut self, fault: &Fault, at: f64) -> Option<Promotion> {
        match fault {
            Fault::Kill(t) => self.server(*t).kill(),
            Fault::Freeze { member, thief_clock_s } => {
                let worker_id = worker_id_of(&self.member(*member).cluster);
                self.member(*member).signal_all("STOP");
                // The thief asks for the worker id once its lease ran out (it is refused
                // until then: the registry never takes a held worker id).
                self.thief.cluster.stop_if_running();
                self.thief.cluster.append_conf(&[&format!("snowflake.worker_id = {worker_id}")]);
                self.thief.clock.set(*thief_clock_s);
                self.thief_wants = Some(worker_id);
                self.thief.cluster.start();
            }
            Fault::Clock { target, step_s } => self.server(*target).set_clock(*step_s),
            Fault::Partition { member } => {
                self.proxies[*member].iter().for_each(|p| p.set(Link::Cut))
            }
            Fault::Delay { member, ms } => self.proxies[*member]
                .iter()
                .for_each(|p| p.set(Link::Delay(Duration::from_millis(*ms)))),
            Fault::DiskStall => {
                self.disk().ctl("hold fsync pg_snowflake.state.tmp");
            }
            Fault::DiskFail => {
                self.disk().ctl("fail write pg_snowflake.state.tmp EIO");
                self.disk().ctl("fail write pg_snowflake/mark.tmp EIO");
            }
            Fault::PowerCut { .. } => {
                let server = self.members[DISK_MEMBER].as_mut().unwrap();
                // Right after a checkpoint: crash recovery then replays no mark, and only the
                // state file (and its copy) says where the ids ended, as after a power cut that
                // comes between a checkpoint and the next renewal.
                if let Ok(mut c) = Client::connect(&server.cluster.conninfo("postgres"), NoTls) {
                    let _ = c.batch_execute("CHECKPOINT");
                }
                server.fs.as_mut().unwrap().power_cut(&server.cluster);
            }
            Fault::Promote(Target::Registry) => {
                self.registry.fail_over();
            }
            Fault::Promote(_) => {
                let (old_port, new_port) = self.standby_member.fail_over();
                return Some(Promotion { at, member: STANDBY_MEMBER, old_port, new_port });
            }
            Fault::Copy { how } => {
                self.copies += 1;
                let name = format!("{}_copy{}", self.name, self.copies);
                let original = self.member(COPIED_MEMBER);
                let mut cluster = match how {
                    Copied::Stopped => {
                        original.cluster.stop("fast");
                        let copy = original.cluster.copy(&name);
                        original.cluster.start();
                        copy
                    }
                    Copied::Running | Copied::Promoted => {
                        let copy = original.cluster.basebackup(&name);
                        if *how == Copied::Running {
                            fs::remove_file(copy.data().join("standby.signal")).unwrap();
                        }
                        copy
                    }
                };
                cluster.port = self.copy_port;
                cluster.append_conf(&[&format!("port = {}", self.copy_port)]);
                let clock = cluster.use_fake_clock();
                let offset_s = original.offset_s;
                clock.set(offset_s);
                cluster.start();
                if *how == Copied::Promoted {
                    poll(Duration::from_secs(30), Duration::from_millis(100), || {
                        let streaming: bool = original.cluster.connect().scalar(
                            "SELECT EXISTS (SELECT FROM pg_stat_replication
                                             WHERE application_name = 'walreceiver')",
                        );
                        streaming.then_some(()).ok_or("the copy does not stream yet".into())
                    });
                    cluster.promote();
                }
                // Its clients' ids count only once it holds a lease of its own: waited for here,
                // so that every copy fault has the copy making ids beside its original.
                let started = Instant::now();
                let mut c = cluster.connect();
                poll(Duration::from_secs(30), Duration::from_millis(50), || {
                    let s = stats(&mut c);
                    (s["registry"]["source"] == "leased")
                        .then_some(())
                        .ok_or(format!("the copy holds no lease: {}", s["registry"]))
                });
                eprintln!(
                    "  the copy ({how:?}) leased worker id {} {} ms after its start",
                    stats(&mut c)["worker_id"],
                    started.elapsed().as_millis()
                );
                self.copy = Some(Server { cluster, clock, offset_s, fs: None });
            }
            Fault::CrashLoop { member, crashes } => {
                let server = self.member(*member);
                for _ in 0..*crashes {
                    server.kill();
                    server.cluster.start();
                    let mut c = server.cluster.connect();
                    poll(Duration::from_secs(30), Duration::from_millis(50), || {
                        c.query_one("SELECT snowflake_next()", &[])
                            .map(|_| ())
                            .map_err(|e| format!("{e}"))
                    });
                }
            }
            Fault::Lose { member, lost } => {
                let server = self.member(*member);
                server.cluster.stop("fast");
                let file = match lost {
                    Lost::StateFile => "pg_snowflake.state",
                    Lost::Copy => "pg_snowflake/mark",
                };
                fs::remove_file(server.cluster.data().join(file)).unwrap();
                server.cluster.start();
            }
        }
        None
    }

    /// Ends a fault.
    pub fn heal(&mut self, fault: &Fault) {
        match fault {
            Fault::Kill(t) => self.server(*t).cluster.start(),
            Fault::Freeze { member, .. } => {
                self.member(*member).signal_all("CONT");
            }
            Fault::Clock { target, .. } => self.server(*target).set_clock(0.0),
            Fault::Partition { member } | Fault::Delay { member, .. } => {
                self.proxies[*member].iter().for_each(|p| p.set(Link::Pass))
            }
            Fault::DiskStall => {
                self.disk().ctl("release");
                self.disk().ctl("clear");
            }
            Fault::DiskFail => {
                self.disk().ctl("clear");
            }
            Fault::PowerCut { back_s } => {
                let server = self.members[DISK_MEMBER].as_ref().unwrap();
                server.set_clock(-back_s);
                server.cluster.start();
            }
            Fault::Promote(Target::Registry) => self.registry.rewind_old(),
            Fault::Promote(_) => self.standby_member.rewind_old(),
            Fault::Copy { .. } => {
                // Gone for good: its ids are in the history, and its lease runs out.
                if let Some(copy) = self.copy.take() {
                    copy.cluster.stop("immediate");
                }
            }
            Fault::Lose { .. } | Fault::CrashLoop { .. } => {}
        }
    }

    /// Everything back to normal once the schedule is over: every link passes, every clock at
    /// its own offset, every server running, the thief stopped, and a member whose worker id
    /// went to the thief restarted (it refuses ids until then, as documented).
    pub fn heal_all(&mut self) {
        for p in self.proxies.iter().flatten() {
            p.set(Link::Pass);
        }
        self.thief.cluster.stop_if_running();
        self.thief_wants = None;
        if let Some(copy) = self.copy.take() {
            copy.cluster.stop("immediate");
        }
        let disk = self.members[DISK_MEMBER].as_ref().unwrap();
        disk.fs.as_ref().unwrap().ctl("clear");
        for t in self.targets() {
            let s = self.server(t);
            s.signal_all("CONT");
            if !s.running() {
                s.cluster.start();
            }
            s.set_clock(0.0);
        }
        for m in 0..MEMBERS {
            let server = self.member(m);
            let lost = (|| -> Option<bool> {
                let mut c = Client::connect(&server.cluster.conninfo("postgres"), NoTls).ok()?;
                let st = stats(&mut c);
                Some(st["registry"]["source"] == "lost")
            })();
            if lost == Some(true) {
                server.cluster.restart("fast");
            }
        }
    }

    fn targets(&self) -> Vec<Target> {
        let mut t = vec![Target::Registry, Target::RegistryStandby, Target::MemberStandby];
        t.extend((0..MEMBERS).map(Target::Member));
        t
    }

    fn disk(&self) -> &FaultFs {
        self.members[DISK_MEMBER].as_ref().unwrap().fs.as_ref().unwrap()
    }

    /// The ids in each member's table now, from its primary.
    pub fn stored(&self, m: usize) -> Vec<i64> {
        let mut c = self.member(m).cluster.connect();
        c.query("SELECT id FROM t", &[]).unwrap().iter().map(|r| r.get(0)).collect()
    }

    /// The server logs, for a failure's report.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for t in self.targets() {
            let s = self.server(t);
            out.push_str(&format!(
                "--- {t} ({}) ---\n{}\n",
                s.cluster.name,
                tail(&s.cluster.log(), 60)
            ));
        }
        out
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A cluster with a fake clock at `offset_s`, not started.
fn fake_clock_server(name: &str, conf: &[&str], offset_s: f64) -> Server {
    let mut cluster = Cluster::init(name, conf);
    let clock = cluster.use_fake_clock();
    clock.set(offset_s);
    Server { cluster, clock, offset_s, fs: None }
}

/// A started synchronous standby of `primary`, with a fake clock of its own.
fn standby_of(primary: &Server, name: &str, offset_s: f64) -> Server {
    let mut cluster = primary.cluster.basebackup(name);
    let clock = cluster.use_fake_clock();
    clock.set(offset_s);
    cluster.start();
    Server { cluster, clock, offset_s, fs: None }
}

/// Makes `standby` synchronous to `primary`, and `primary` to `standby` once they swap: both
/// get `synchronous_standby_names = '*'` (inert on a standby), and the primary waits until its
/// standby streams as synchronous. (In the configuration from the start, the first commit on the
/// primary would wait for a standby that does not exist yet.)
fn synchronous(primary: &Server, standby: &Server) {
    for s in [primary, standby] {
        s.cluster.append_conf(&["synchronous_standby_names = '*'"]);
        s.cluster.reload();
    }
    wait_for_one_synchronous_standby(&mut primary.cluster.connect());
}

/// The worker id a member uses now, from its stats.
fn worker_id_of(cluster: &Cluster) -> i32 {
    let mut c = cluster.connect();
    stats(&mut c)["worker_id"].as_i64().expect("the member has a worker id") as i32
}

/// The clients: per member one that inserts through `DEFAULT snowflake_next()` and one that
/// calls `snowflake_next()`, each recording every call; on a broken connection they connect
/// again (a new session). The thief has one of each while it runs.
pub struct Clients {
    pub calls: Arc<Mutex<Vec<Call>>>,
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Clients {
    pub fn start(fleet: &Fleet, epoch: Instant) -> Clients {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let sessions = Arc::new(AtomicU64::new(0));
        let mut handles = vec![];
        let mut targets: Vec<(usize, String)> =
            fleet.client_conninfo.iter().cloned().enumerate().collect();
        targets.push((THIEF, fleet.thief_conninfo.clone()));
        targets.push((COPY, fleet.copy_conninfo.clone()));
        for (member, conninfo) in targets {
            // The thief and the copy only draw ids: their rows would leave with them.
            let kinds: &[bool] = if member >= COPY { &[false] } else { &[true, false] };
            for &inserting in kinds {
                let (calls, stop, sessions, conninfo) =
                    (calls.clone(), stop.clone(), sessions.clone(), conninfo.clone());
                handles.push(std::thread::spawn(move || {
                    client(member, &conninfo, inserting, epoch, &calls, &stop, &sessions)
                }));
            }
        }
        Clients { calls, stop, handles }
    }

    pub fn stop(self) -> Vec<Call> {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles {
            h.join().unwrap();
        }
        Arc::try_unwrap(self.calls).unwrap().into_inner().unwrap()
    }
}

fn client(
    member: usize,
    conninfo: &str,
    inserting: bool,
    epoch: Instant,
    calls: &Mutex<Vec<Call>>,
    stop: &AtomicBool,
    sessions: &AtomicU64,
) {
    let now = || epoch.elapsed().as_secs_f64();
    let mut conn: Option<(Client, u64, u16)> = None;
    while !stop.load(Ordering::Relaxed) {
        let Some((c, session, port)) = conn.as_mut() else {
            let connected = Client::connect(conninfo, NoTls).ok().and_then(|mut c| {
                let port: i32 = c.query_one("SELECT inet_server_port()", &[]).ok()?.get(0);
                Some((c, sessions.fetch_add(1, Ordering::Relaxed), port as u16))
            });
            if connected.is_none() {
                std::thread::sleep(Duration::from_millis(100));
            }
            conn = connected;
            continue;
        };
        let sent = now();
        let result = if inserting {
            c.query_one("INSERT INTO t (session) VALUES ($1) RETURNING id", &[&(*session as i64)])
        } else {
            c.query_one("SELECT snowflake_next()", &[])
        };
        let outcome = match &result {
            Ok(row) => Outcome::Id { id: row.get(0), inserted: inserting },
            Err(e) => Outcome::Refused {
                code: e.code().map(|c| c.code().to_string()),
                message: e.to_string(),
            },
        };
        calls.lock().unwrap().push(Call {
            sent,
            answered: now(),
            member,
            session: *session,
            port: *port,
            outcome,
        });
        match result {
            Err(e) if e.is_closed() || e.as_db_error().is_none() => conn = None,
            // A session the server ended (a shutdown, a crash of another backend).
            Err(e) if e.code().is_some_and(|c| c.code().starts_with("57P")) => conn = None,
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
            Ok(_) => std::thread::sleep(Duration::from_millis(3)),
        }
    }
}
