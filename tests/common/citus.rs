//! A Citus cluster on this machine, for tests/replication/citus.rs and `make bench`: a coordinator and
//! workers, each a `Cluster` with Citus first in `shared_preload_libraries` and pg_snowflake
//! second, metadata synced to every worker (Citus's default since 11: queries and writes may be
//! sent to any node), one database (`postgres`).
//!
//! Worker ids as docs/citus.md recommends: the coordinator is the registry, and every node, the
//! coordinator too, leases its worker id from the coordinator's database with one and the same
//! configuration (`snowflake.worker_id = -1`, `snowflake.registry` naming the coordinator).
//!
//! Citus is built by scripts/build-citus.sh into the server that `PG_CONFIG` names (`make test`
//! runs it through scripts/setup.sh): without it, every Citus test fails, saying how to get it.

pub use super::registry::leased_worker_id;
use super::*;

/// The Citus release scripts/build-citus.sh installs into the server under test.
pub fn citus_version() -> String {
    let out = check(
        Command::new(root_dir().join("scripts/build-citus.sh"))
            .args(["--version", &major_under_test()])
            .output()
            .unwrap(),
        "scripts/build-citus.sh --version",
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether a Citus release supports the major under test (scripts/build-citus.sh knows which:
/// none supports 19, where tests/replication/citus.rs does not run, as the Makefile says).
pub fn has_release() -> bool {
    Command::new(root_dir().join("scripts/build-citus.sh"))
        .args(["--version", &major_under_test()])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Fails, saying how to get Citus, unless scripts/build-citus.sh installed it into the server
/// under test (its library and its stamp): a Citus test never skips.
pub fn require_citus() {
    let pg_config_path = default_pg_config();
    let lib = pg_config(&pg_config_path, "--pkglibdir").join("citus.so");
    let stamp = pg_config(&pg_config_path, "--sharedir").join("extension/citus.pg_snowflake-build");
    if lib.exists() && stamp.exists() {
        return;
    }
    let major = major_under_test();
    let how = Command::new(root_dir().join("scripts/build-citus.sh"))
        .args(["--how", &major])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    panic!(
        "Citus is not installed into PostgreSQL {major} ({} or {} is missing): the Citus tests \
         need it and never skip.\n{how}",
        lib.display(),
        stamp.display()
    );
}

/// What every node of a test's Citus cluster has in its configuration, the coordinator's too:
/// Citus first (it refuses to load after another planner hook), no SSL between the nodes (the
/// test servers have no certificates), logical WAL for shard moves, room for Citus's
/// connections and background workers, 8 shards per table (32 by default: a test's queries then
/// open fewer connections), and the worker id leased from the coordinator's database, as the
/// role `fleet` (`registry_conf`).
pub const NODE_CONF: [&str; 7] = [
    "shared_preload_libraries = 'citus,pg_snowflake'",
    "citus.node_conninfo = 'sslmode=disable'",
    "wal_level = logical",
    "max_connections = 120",
    "max_worker_processes = 24",
    "citus.shard_count = 8",
    "snowflake.worker_id = -1",
];

/// `snowflake.registry` naming the database of the coordinator at `port`.
pub fn registry_conf(port: u16) -> String {
    format!("snowflake.registry = 'host=127.0.0.1 port={port} dbname=postgres user=fleet'")
}

pub struct Citus {
    pub coordinator: Cluster,
    pub workers: Vec<Cluster>,
    name: String,
    /// Each node's configuration after NODE_CONF, the registry line included.
    conf: Vec<String>,
}

impl Citus {
    /// A coordinator and `workers` workers, each configured with NODE_CONF, the registry on the
    /// coordinator and `conf` (later lines win), pg_snowflake created on the coordinator (Citus
    /// creates it on the workers), and every node's worker id leased.
    pub fn start(name: &str, workers: usize, conf: &[&str]) -> Citus {
        Citus::start_with(name, workers, conf, true, "CREATE EXTENSION pg_snowflake")
    }

    /// `start`, with `registry` false: no `snowflake.registry` line (`conf` then gives the
    /// worker ids), and no wait for leases; `create` creates pg_snowflake on the coordinator
    /// (at an earlier version: no wait for leases either).
    /// `{coordinator}` in `conf` is the coordinator's port.
    pub fn start_with(
        name: &str,
        workers: usize,
        conf: &[&str],
        registry: bool,
        create: &str,
    ) -> Citus {
        require_citus();
        let coordinator = Cluster::init(&format!("{name}_coord"), &NODE_CONF);
        let mut lines: Vec<String> = Vec::new();
        if registry {
            lines.push(registry_conf(coordinator.port));
        }
        lines
            .extend(conf.iter().map(|l| l.replace("{coordinator}", &coordinator.port.to_string())));
        coordinator.append_conf(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        coordinator.start();
        let mut c = coordinator.connect();
        // The members' role may lease and nothing more (docs/many-servers.md); Citus creates
        // the role on every node it adds. An earlier release (the lifecycle test's 0.4.0) has
        // the lease function of its members, which an update grants on (0.6.0: hold).
        c.batch_execute(&format!(
            "CREATE EXTENSION citus;
             SELECT citus_set_coordinator_host('127.0.0.1', {});
             CREATE ROLE fleet LOGIN;
             {create};
             DO $grant$ BEGIN
                 IF to_regproc('snowflake.snowflake_registry_hold') IS NOT NULL THEN
                     GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_hold TO fleet;
                 ELSE
                     GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_lease TO fleet;
                 END IF;
             END $grant$;",
            coordinator.port
        ))
        .unwrap_or_else(|e| panic!("setting up the coordinator: {e}\n{}", coordinator.log()));
        // The Citus the server loaded is the release scripts/build-citus.sh built (14.0.1 shows
        // as 14.0-1).
        let loaded: String =
            c.scalar("SELECT extversion FROM pg_extension WHERE extname = 'citus'");
        let built = citus_version();
        assert!(
            built.starts_with(loaded.split('-').next().unwrap_or_default()),
            "the server runs Citus {loaded}, not the {built} of scripts/build-citus.sh"
        );
        let mut citus =
            Citus { coordinator, workers: Vec::new(), name: name.to_string(), conf: lines };
        for _ in 0..workers {
            citus.add_worker();
        }
        // A registry of an earlier release (`create` names its version) leases nothing to
        // members of this one until it is updated: the caller waits after its update.
        if registry && !create.contains("VERSION") {
            for node in citus.nodes() {
                leased_worker_id(node);
            }
        }
        citus
    }

    /// Every node, the coordinator first.
    pub fn nodes(&self) -> Vec<&Cluster> {
        std::iter::once(&self.coordinator).chain(self.workers.iter()).collect()
    }

    /// A new worker, configured as the others, started, and added to the cluster from the
    /// coordinator (Citus then creates pg_snowflake there and syncs the metadata). Returns its
    /// index in `workers`.
    pub fn add_worker(&mut self) -> usize {
        let worker = self.init_worker(&[]);
        worker.start();
        self.join(&worker);
        self.workers.push(worker);
        self.workers.len() - 1
    }

    /// A worker configured as the others plus `conf`, not started and not added.
    pub fn init_worker(&self, conf: &[&str]) -> Cluster {
        let n = self.workers.len() + 1;
        let worker = Cluster::init(&format!("{}_w{n}", self.name), &NODE_CONF);
        let mut lines: Vec<&str> = self.conf.iter().map(String::as_str).collect();
        lines.extend_from_slice(conf);
        worker.append_conf(&lines);
        worker
    }

    /// Adds a started worker to the cluster: Citus there, then `citus_add_node` on the
    /// coordinator.
    pub fn join(&self, worker: &Cluster) {
        worker
            .connect()
            .batch_execute("CREATE EXTENSION IF NOT EXISTS citus")
            .unwrap_or_else(|e| panic!("CREATE EXTENSION citus on {}: {e}", worker.name));
        self.coordinator
            .connect()
            .batch_execute(&format!("SELECT citus_add_node('127.0.0.1', {})", worker.port))
            .unwrap_or_else(|e| {
                panic!("citus_add_node of {}: {e}\n--- its log ---\n{}", worker.name, worker.log())
            });
    }
}

/// The worker id in use on `node` (`snowflake_stats()`), or None.
pub fn node_worker_id(node: &Cluster) -> Option<i64> {
    stats(&mut node.connect())["worker_id"].as_i64()
}
