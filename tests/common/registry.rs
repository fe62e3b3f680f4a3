//! A worker-id registry and its members, set up as docs/many-servers.md says: the registry is a
//! server with pg_snowflake installed, and members connect to it as a plain role whose one
//! grant is EXECUTE on the lease function.

use super::{poll, stats, Client, Cluster, SHORTEST_LEASE};
use std::time::Duration;

/// Makes `role` a login role of `c`'s server with the one grant a member needs.
pub fn grant_lease(c: &mut Client, role: &str) {
    c.batch_execute(&format!(
        "CREATE ROLE {role} LOGIN;
         GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_hold TO {role};"
    ))
    .unwrap();
}

/// A registry: a server with pg_snowflake installed in `postgres`, and the role `fleet` that
/// members connect as (`fleet_a`, `fleet_b`, too: roles a test can lock out one at a time).
pub fn registry(name: &str) -> (Cluster, Client) {
    let hub = Cluster::start_new(name, &[]);
    let mut c = hub.connect_ext();
    for role in ["fleet", "fleet_a", "fleet_b"] {
        grant_lease(&mut c, role);
    }
    (hub, c)
}

/// What makes a server a member: no worker id of its own, `snowflake.registry` naming the
/// database `dbname` of the server at `port` as `role`, and the shortest lease (so that leases
/// run out within a test); then `conf`.
pub fn member_conf(port: u16, role: &str, dbname: &str, conf: &[&str]) -> Vec<String> {
    let mut lines = vec![
        "snowflake.worker_id = -1".to_string(),
        format!("snowflake.registry = 'host=127.0.0.1 port={port} user={role} dbname={dbname}'"),
        SHORTEST_LEASE.to_string(),
    ];
    lines.extend(conf.iter().map(|l| l.to_string()));
    lines
}

/// A member (initialised, not started) of the registry in the database `dbname` of the server
/// at `port`, connecting as `role`, with `conf` after [`member_conf`]'s lines.
pub fn member_in(name: &str, port: u16, role: &str, dbname: &str, conf: &[&str]) -> Cluster {
    let lines = member_conf(port, role, dbname, conf);
    Cluster::init(name, &lines.iter().map(String::as_str).collect::<Vec<_>>())
}

/// A member of `hub`'s registry in its database `postgres` (see [`member_in`]).
pub fn member(name: &str, hub: &Cluster, role: &str, conf: &[&str]) -> Cluster {
    member_in(name, hub.port, role, "postgres", conf)
}

/// Waits until `node`'s worker id is leased from the registry; returns it.
pub fn leased_worker_id(node: &Cluster) -> i64 {
    let mut c = node.connect();
    let mut worker_id = -1;
    poll(Duration::from_secs(60), Duration::from_millis(100), || {
        let s = stats(&mut c);
        match (s["registry"]["source"].as_str(), s["worker_id"].as_i64()) {
            (Some("leased"), Some(w)) => {
                worker_id = w;
                Ok(())
            }
            _ => Err(format!(
                "{} has no leased worker id: {}\n--- its log ---\n{}",
                node.name,
                s["registry"],
                node.log()
            )),
        }
    });
    worker_id
}
