//! The worker-id registry (src/coordination/registry/): servers with `snowflake.registry` set lease their
//! worker ids from a table in another PostgreSQL server, through a background worker, against
//! real servers started here. Every member connects as `fleet`, a plain role with only the
//! grant docs/many-servers.md gives it (EXECUTE on the lease function).
#![cfg(not(feature = "pg_test"))]

use common::mallory::Mallory;
use common::registry::{member, member_conf, member_in, registry};
use common::*;
use postgres::Client;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use testkit as common;

#[test]
fn sixteen_servers_starting_at_once_lease_sixteen_worker_ids_and_a_seventeenth_is_refused_a_held_one(
) {
    let (hub, mut h) = registry("reg_hub16");
    let members: Vec<Cluster> =
        (0..16).map(|i| member(&format!("reg_m{i}"), &hub, "fleet", &[])).collect();
    // All at once: their registry workers race for the lowest free worker id.
    std::thread::scope(|s| {
        for m in &members {
            s.spawn(|| m.start());
        }
    });
    let mut by_worker: BTreeMap<i32, String> = BTreeMap::new();
    let mut firsts = vec![];
    for m in &members {
        let mut c = m.connect_ext();
        let id = first_id(&mut c, Duration::from_secs(60));
        let w = worker_id_of(&mut c, id);
        let r = registry_stats(&mut c);
        assert_eq!(r["source"], "leased", "{r}");
        assert_eq!(stats(&mut c)["worker_id"], w, "stats show the leased worker id");
        if let Some(other) = by_worker.insert(w, m.data().display().to_string()) {
            panic!("worker id {w} was leased twice: {other} and {}", m.data().display());
        }
        firsts.push(id);
    }
    assert_eq!(by_worker.len(), 16);
    // The registry agrees: 16 rows, 16 clusters, each worker id once.
    let rows = h
        .query(
            "SELECT worker_id, system_identifier FROM snowflake.snowflake_registry
              WHERE namespace = 'default' AND expires > now()",
            &[],
        )
        .unwrap();
    let ids: BTreeSet<i32> = rows.iter().map(|r| r.get(0)).collect();
    let clusters: BTreeSet<i64> = rows.iter().map(|r| r.get(1)).collect();
    assert_eq!((rows.len(), ids.len(), clusters.len()), (16, 16, 16));
    assert_eq!(ids, by_worker.keys().copied().collect());

    // A 17th asking for a held worker id: refused, naming the holder, never a guess.
    let held = *by_worker.keys().next().unwrap();
    let wanted = format!("snowflake.worker_id = {held}");
    let late = member("reg_m16", &hub, "fleet", &[&wanted]);
    late.start();
    let mut c = late.connect_ext();
    let (message, detail) =
        wait_for_refusal(&mut c, "leased to another cluster", Duration::from_secs(30));
    assert!(message.contains("holds no worker id lease"), "{message}");
    assert!(detail.contains(&format!("worker id {held}")), "{detail}");
    let e = c.query_one("SELECT snowflake_next()", &[]).unwrap_err();
    let db = e.as_db_error().unwrap();
    assert_eq!(db.code().code(), "55000");
    assert!(
        db.hint().unwrap_or_default().contains("another snowflake.worker_id"),
        "the hint says what to do about a held worker id: {db:?}"
    );
    assert_eq!(registry_stats(&mut c)["source"], "none");
}

#[test]
fn with_the_registry_stopped_members_go_on_under_their_leases_and_all_recover_when_it_returns() {
    let (hub, _) = registry("reg_hub_down");
    let a = member("reg_down_a", &hub, "fleet", &[]);
    a.start();
    let mut ca = a.connect_ext();
    let before = first_id(&mut ca, Duration::from_secs(30));
    let w = worker_id_of(&mut ca, before);

    hub.stop("fast");
    // A running member goes on under its lease.
    let during: i64 = ca.scalar("SELECT snowflake_next()");
    assert!(during > before);
    poll(Duration::from_secs(20), Duration::from_millis(100), || {
        let r = registry_stats(&mut ca);
        let problem = r["problem"].as_str().unwrap_or_default().to_string();
        problem.contains("unreachable").then_some(()).ok_or(format!("{r}"))
    });

    // Restarted while the registry is down: the cached lease, same worker id.
    a.restart("fast");
    let mut ca = a.connect_ext();
    let r = registry_stats(&mut ca);
    assert_eq!(r["source"], "cached", "{r}");
    let after: i64 = ca.scalar("SELECT snowflake_next()");
    assert!(after > during, "ids after the restart are above the ones before");
    assert_eq!(worker_id_of(&mut ca, after), w);

    // A new member has no lease to go on with: a clear error, never a guessed worker id.
    let b = member("reg_down_b", &hub, "fleet", &[]);
    b.start();
    let mut cb = b.connect_ext();
    let (message, detail) = wait_for_refusal(&mut cb, "unreachable", Duration::from_secs(20));
    assert!(message.contains("holds no worker id lease"), "{message}");
    assert!(detail.contains("127.0.0.1"), "the detail names the registry: {detail}");

    // The cached lease runs out (10 s after the last renewal): A stops too, and says why.
    let (message, detail) = wait_for_refusal(&mut ca, "ran out", Duration::from_secs(20));
    assert!(message.contains(&format!("worker id {w}")), "{message}");
    assert!(detail.contains("unreachable"), "{detail}");

    // The registry returns: both lease, and A keeps its worker id.
    hub.start();
    let resumed = first_id(&mut ca, Duration::from_secs(30));
    assert!(resumed > after);
    assert_eq!(worker_id_of(&mut ca, resumed), w);
    assert_eq!(registry_stats(&mut ca)["source"], "leased");
    let id_b = first_id(&mut cb, Duration::from_secs(30));
    assert_ne!(worker_id_of(&mut cb, id_b), w);
}

#[test]
fn a_reused_worker_id_starts_above_its_previous_holder_even_with_the_clock_30_s_behind() {
    let (hub, _) = registry("reg_hub_reuse");
    let a = member("reg_reuse_a", &hub, "fleet", &[]);
    a.start();
    let mut ca = a.connect_ext();
    first_id(&mut ca, Duration::from_secs(30));
    let last_of_a: i64 = ca.scalar("SELECT max(snowflake_next()) FROM generate_series(1, 10000)");
    let w = worker_id_of(&mut ca, last_of_a);
    drop(ca);
    a.stop("immediate");

    // B asks for exactly A's worker id, with a clock 30 s behind (max_drift allows 60 s).
    let wanted = format!("snowflake.worker_id = {w}");
    let mut b = member("reg_reuse_b", &hub, "fleet", &[&wanted, "snowflake.max_drift = '60s'"]);
    let clock = b.use_fake_clock();
    clock.set(-30.0);
    b.start();
    clock.check();
    let mut cb = b.connect_ext();
    // Refused while A's lease lasts.
    let (_, detail) =
        wait_for_refusal(&mut cb, "leased to another cluster", Duration::from_secs(10));
    assert!(detail.contains(&format!("worker id {w} ")), "{detail}");
    // Then B takes it over, above every id A made.
    let first_of_b = first_id(&mut cb, Duration::from_secs(40));
    assert_eq!(worker_id_of(&mut cb, first_of_b), w);
    assert!(
        first_of_b > last_of_a,
        "the new holder's first id {first_of_b} is not above the old holder's last {last_of_a}"
    );
    let more: i64 = cb.scalar("SELECT min(snowflake_next()) FROM generate_series(1, 10000)");
    assert!(more > last_of_a);
}

#[test]
fn a_member_cut_off_past_its_lease_refuses_ids_once_its_worker_id_went_to_another() {
    let (hub, mut h) = registry("reg_hub_lost");
    let a = member("reg_lost_a", &hub, "fleet_a", &[]);
    a.start();
    let mut ca = a.connect_ext();
    first_id(&mut ca, Duration::from_secs(30));
    let last_of_a: i64 = ca.scalar("SELECT snowflake_next()");
    let w = worker_id_of(&mut ca, last_of_a);

    // A is cut off from the registry (its role may no longer log in) until its lease runs out.
    h.batch_execute("ALTER ROLE fleet_a NOLOGIN").unwrap();
    wait_for_refusal(&mut ca, "ran out", Duration::from_secs(20));

    // B takes A's worker id over.
    let wanted = format!("snowflake.worker_id = {w}");
    let b = member("reg_lost_b", &hub, "fleet_b", &[&wanted]);
    b.start();
    let mut cb = b.connect_ext();
    let first_of_b = first_id(&mut cb, Duration::from_secs(30));
    assert!(first_of_b > last_of_a);

    // A reaches the registry again: its worker id is B's now, and A refuses for good.
    h.batch_execute("ALTER ROLE fleet_a LOGIN").unwrap();
    let (message, _) =
        wait_for_refusal(&mut ca, "was leased to another cluster", Duration::from_secs(20));
    assert!(message.contains(&format!("worker id {w}")), "{message}");
    assert_eq!(registry_stats(&mut ca)["source"], "lost");
    // B goes on.
    let next_of_b: i64 = cb.scalar("SELECT snowflake_next()");
    assert!(next_of_b > first_of_b);
}

/// An ordinary failover: the primary stops (`-m immediate`, as a crash), its standby is
/// promoted. The standby is another start of the cluster, elsewhere: while the primary's lease
/// runs it takes a worker id of its own (in 0.5.0 it took the primary's, as a copy started beside
/// it would have: nothing told the two apart), and its ids go on above the primary's (the WAL
/// marks it replayed).
#[test]
fn a_promoted_standby_takes_its_own_worker_id_and_goes_on_above_its_primary() {
    let (hub, _) = registry("reg_hub_ha");
    let primary = member("reg_ha_p", &hub, "fleet", &[]);
    primary.start();
    let mut cp = primary.connect_ext();
    first_id(&mut cp, Duration::from_secs(30));
    let standby = primary.basebackup("reg_ha_s");
    standby.start();
    let mut cs = standby.connect();
    let last: i64 = cp.scalar("SELECT snowflake_next()");
    let w = worker_id_of(&mut cp, last);
    // WAL written after the base backup: the standby has it only if it streams, which its
    // walreceiver does with its own server's libpq. libpq is loaded by the registry's worker
    // alone, never by the postmaster, whose children would all inherit it.
    cp.batch_execute("CREATE TABLE streamed (i int)").unwrap();
    wait_for_replay(&mut cp, &mut cs);
    for server in [&primary, &standby] {
        let pid = server.postmaster_pid().unwrap();
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        assert!(!maps.contains("libpq.so"), "the postmaster of {pid} maps libpq");
    }
    drop(cp);
    primary.stop("immediate");
    standby.promote();
    let mut cs = standby.connect();
    let first = first_id(&mut cs, Duration::from_secs(30));
    assert_ne!(worker_id_of(&mut cs, first), w, "the primary's worker id, while its lease runs");
    assert!(first > last);
    poll(Duration::from_secs(20), Duration::from_millis(100), || {
        let r = registry_stats(&mut cs);
        (r["source"] == "leased").then_some(()).ok_or(format!("{r}"))
    });
}

#[test]
fn bad_registry_settings_and_calls_give_clear_errors_never_a_guessed_worker_id() {
    let (hub, mut h) = registry("reg_hub_bad");

    // A connection string libpq cannot read: refused at start, said at every call.
    let malformed = Cluster::init(
        "reg_bad_conninfo",
        &["snowflake.worker_id = -1", "snowflake.registry = 'host=x nonsense=1'"],
    );
    malformed.start();
    let mut c = malformed.connect_ext();
    let ServerError { code, message, detail, .. } = next_error(&mut c);
    assert_eq!(code, "55000");
    assert!(message.contains("holds no worker id lease"), "{message}");
    assert!(
        detail.contains("not a valid connection string") && detail.contains("nonsense"),
        "{detail}"
    );
    assert!(malformed.log().contains("snowflake.registry is not a valid connection string"));

    // Nothing listening there.
    let nowhere = Cluster::init(
        "reg_bad_nowhere",
        &[
            "snowflake.worker_id = -1",
            &format!("snowflake.registry = 'host=127.0.0.1 port={} user=fleet'", free_port()),
        ],
    );
    nowhere.start();
    let mut c = nowhere.connect_ext();
    wait_for_refusal(&mut c, "unreachable", Duration::from_secs(20));

    // A database without pg_snowflake.
    h.batch_execute("CREATE DATABASE bare").unwrap();
    let port = hub
        .conninfo("x")
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("port=").map(String::from))
        .unwrap();
    let bare = Cluster::init(
        "reg_bad_bare",
        &[
            "snowflake.worker_id = -1",
            &format!("snowflake.registry = 'host=127.0.0.1 port={port} user=fleet dbname=bare'"),
        ],
    );
    bare.start();
    let mut c = bare.connect_ext();
    wait_for_refusal(&mut c, "pg_snowflake is not installed", Duration::from_secs(20));

    // A namespace with no free worker id: one member leases, every other worker id is held.
    let full = member("reg_bad_full1", &hub, "fleet", &["snowflake.registry_namespace = 'full'"]);
    full.start();
    first_id(&mut full.connect_ext(), Duration::from_secs(30));
    h.batch_execute(
        "INSERT INTO snowflake.snowflake_registry
         SELECT 'full', w, 42, 'elsewhere', now(), now(), now() + interval '1 hour', 0, 0
           FROM snowflake.snowflake_registry, generate_series(0, 1023) w
          WHERE namespace = 'full' AND w <> worker_id",
    )
    .unwrap();
    let second = member("reg_bad_full2", &hub, "fleet", &["snowflake.registry_namespace = 'full'"]);
    second.start();
    let mut c = second.connect_ext();
    let (_, detail) = wait_for_refusal(&mut c, "is free", Duration::from_secs(20));
    assert!(detail.contains("no worker id of namespace \"full\" is free"), "{detail}");

    // A namespace PostgreSQL accepts but the registry cannot key on.
    let empty = member("reg_bad_ns", &hub, "fleet", &["snowflake.registry_namespace = ''"]);
    empty.start();
    let ServerError { detail, .. } = next_error(&mut empty.connect_ext());
    assert!(detail.contains("snowflake.registry_namespace"), "{detail}");

    // The lease function's own checks, for whoever calls it by hand.
    for (args, state) in [
        ("'x', 'twitter', 1288834974657, 1, 41, 10, 12, false, 1024, 1, 'n', 10000, 0", "22023"),
        ("'x', 'twitter', 1288834974657, 1, 41, 10, 12, false, -1, 1, 'n', 10000, 0", "22023"),
        ("'x', 'twitter', 1288834974657, 1, 41, 10, 12, false, 1, 1, 'n', 10, 0", "22023"),
        ("'x', 'twitter', 1288834974657, 1, 41, 10, 12, false, 1, 1, 'n', 10000, -5", "22023"),
        ("'x', 'twitter', 1288834974657, 0, 41, 10, 12, false, 1, 1, 'n', 10000, 0", "22023"),
        ("'x', 'twitter', 1288834974657, 1, 41, 20, 12, false, 1, 1, 'n', 10000, 0", "22023"),
        ("'', 'twitter', 1288834974657, 1, 41, 10, 12, false, 1, 1, 'n', 10000, 0", "22023"),
        ("NULL, 'twitter', 1288834974657, 1, 41, 10, 12, false, 1, 1, 'n', 10000, 0", "22004"),
        ("'x', 'twitter', 1288834974657, 1, 41, 10, 12, NULL, 1, 1, 'n', 10000, 0", "22004"),
    ] {
        let call = format!("SELECT * FROM snowflake.snowflake_registry_lease({args})");
        let ServerError { code, .. } = expect_error(&mut h, &call);
        assert_eq!(code, state, "{call}");
    }
    // And those of 0.6.0's: a place and secrets of 64 hexadecimal digits, a next secret with
    // every place.
    let hex = "repeat('ab', 32)";
    for (tail, state) in [
        (format!("'nothex', NULL, {hex}"), "22023"),
        (format!("{hex}, 'short', {hex}"), "22023"),
        (format!("{hex}, NULL, upper({hex})"), "22023"),
        (format!("{hex}, NULL, NULL"), "22004"),
        (format!("NULL, {hex}, NULL"), "22004"),
    ] {
        let call = format!(
            "SELECT * FROM snowflake.snowflake_registry_hold('x', 'twitter', 1288834974657, 1, \
             41, 10, 12, false, 1, NULL, 1, 'n', 10000, 0, {tail})"
        );
        let ServerError { code, .. } = expect_error(&mut h, &call);
        assert_eq!(code, state, "{call}");
    }
    // The members' role leases through the function and nothing else: it cannot lower a
    // coverage or hand a worker id over by writing the table.
    let mut f = hub.connect_as("fleet");
    for sql in [
        "UPDATE snowflake.snowflake_registry SET covered_until_ms = 0",
        "DELETE FROM snowflake.snowflake_registry",
        "INSERT INTO snowflake.snowflake_registry VALUES ('x', 5, 1, 'n', now(), now(), now(), 0, 0)",
        "INSERT INTO snowflake.snowflake_registry_namespaces
         VALUES ('y', 'twitter', 0, 1, 41, 10, 12, false, now())",
    ] {
        let ServerError { code, .. } = expect_error(&mut f, sql);
        assert_eq!(code, "42501", "{sql}");
    }
    // A plain role in a member sees that there is no lease, not the registry's host or roles.
    let mut c = nowhere.connect();
    c.batch_execute("CREATE ROLE app LOGIN").unwrap();
    let mut app = nowhere.connect_as("app");
    let ServerError { code, message, detail, .. } = next_error(&mut app);
    assert_eq!(code, "55000");
    assert!(message.contains("holds no worker id lease"), "{message}");
    assert!(!detail.contains("127.0.0.1") && detail.contains("snowflake_stats()"), "{detail}");
    // ... which has it, once per problem.
    let log = nowhere.log();
    assert!(log.contains("WARNING:  pg_snowflake: the registry is unreachable"), "{log}");
    assert_eq!(log.matches("pg_snowflake: the registry is unreachable").count(), 1, "{log}");
    // A plain role without the grants reads nothing and leases nothing.
    h.batch_execute("CREATE ROLE nobody LOGIN").unwrap();
    let mut n = hub.connect_as("nobody");
    let ServerError { code, .. } =
        expect_error(&mut n, "SELECT * FROM snowflake.snowflake_registry");
    assert_eq!(code, "42501");
    for call in [
        "SELECT * FROM snowflake.snowflake_registry_hold('x', 'twitter', 1288834974657, 1, 41, 10,
                                                        12, false, 1, NULL, 1, 'n', 10000, 0,
                                                        repeat('a', 64), NULL, repeat('b', 64))",
        "SELECT * FROM snowflake.snowflake_registry_lease('x', 'twitter', 1288834974657, 1, 41, 10,
                                                         12, false, 1, 1, 'n', 10000, 0)",
        "SELECT * FROM snowflake_registry_lease('x', 'twitter', 1023, 1, 1, 'n', 10000, 0)",
    ] {
        let ServerError { code, .. } = expect_error(&mut n, call);
        assert_eq!(code, "42501", "{call}");
    }
}

#[test]
fn a_lease_file_copied_into_another_cluster_is_not_a_lease() {
    let (hub, _) = registry("reg_hub_copy");
    let a = member("reg_copy_a", &hub, "fleet", &[]);
    a.start();
    first_id(&mut a.connect_ext(), Duration::from_secs(30));
    let file = a.data().join("pg_snowflake.registry");
    // Another initdb: another system identifier, as after pg_upgrade or in a new cluster made
    // from the files of this one.
    let b = member("reg_copy_b", &hub, "fleet", &[]);
    hub.stop("fast");
    check(
        as_postgres(std::path::Path::new("/bin/cp"), &[])
            .arg(&file)
            .arg(b.data().join("pg_snowflake.registry"))
            .output()
            .unwrap(),
        "cp",
    );
    b.start();
    let mut cb = b.connect_ext();
    let (message, _) = wait_for_refusal(&mut cb, "unreachable", Duration::from_secs(20));
    assert!(message.contains("holds no worker id lease"), "{message}");
    assert_eq!(registry_stats(&mut cb)["source"], "none");
    assert!(!b.log().contains("unreadable"), "the copy was read:\n{}", b.log());
    // The same file in its own cluster is a lease.
    a.restart("fast");
    let mut ca = a.connect_ext();
    assert_eq!(registry_stats(&mut ca)["source"], "cached");
    ca.query_one("SELECT snowflake_next()", &[]).unwrap();
}

#[test]
fn a_renamed_registry_schema_leads_the_lease_to_no_table_of_its_owner() {
    let (hub, mut h) = registry("reg_hub_rename");
    // The registry's database belongs to a plain role, which owns its schema public (15+).
    h.batch_execute("CREATE ROLE owner LOGIN").unwrap();
    h.batch_execute("CREATE DATABASE reg OWNER owner").unwrap();
    let mut conninfo = hub.conninfo("postgres").replace("dbname=postgres", "dbname=reg");
    let mut r = Client::connect(&conninfo, postgres::NoTls).unwrap();
    r.batch_execute(
        "CREATE EXTENSION pg_snowflake;
         GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_hold TO fleet;",
    )
    .unwrap();
    drop(r);
    conninfo = conninfo.replace("user=postgres", "user=owner");
    let mut o = Client::connect(&conninfo, postgres::NoTls).unwrap();
    // The owner moves the extension's schema away and puts a table of its own under the old
    // name, every worker id held by nobody, and open to the members.
    o.batch_execute(
        "ALTER SCHEMA public RENAME TO moved;
         CREATE SCHEMA public;
         CREATE TABLE public.snowflake_registry (
             namespace text, layout text, worker_id integer, system_identifier bigint,
             node_name text, since timestamptz, renewed timestamptz, expires timestamptz,
             covered_until_ms bigint, start_above_ms bigint,
             PRIMARY KEY (namespace, layout, worker_id));
         GRANT ALL ON SCHEMA public TO PUBLIC;
         GRANT ALL ON public.snowflake_registry TO PUBLIC;",
    )
    .unwrap();
    let m = member_in("reg_rename_m", hub.port, "fleet", "reg", &[]);
    m.start();
    first_id(&mut m.connect_ext(), Duration::from_secs(30));
    // The lease is in the extension's table, in its own schema; the owner's has nothing.
    let mut o =
        Client::connect(&conninfo.replace("user=owner", "user=postgres"), postgres::NoTls).unwrap();
    let real: i64 = o.scalar("SELECT count(*) FROM snowflake.snowflake_registry");
    let planted: i64 = o.scalar("SELECT count(*) FROM public.snowflake_registry");
    assert_eq!((real, planted), (1, 0));
}

/// What members send is checked by the registry: a coverage below 0 is refused (0.3.0 recorded
/// `-5`, which the next holder of that worker id took as a start it could never use), a renewal
/// never moves an expiry earlier (with the holder's identity, a member could end another's
/// lease), and which cluster holds a worker id is told to superusers and pg_monitor only.
#[test]
fn the_registry_checks_what_members_send_and_tells_them_no_holder() {
    let (hub, mut h) = registry("reg_hub_checks");
    // 0.5.0's function, which these calls use: granted as during a rolling upgrade.
    h.batch_execute(
        "CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
         GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_lease TO fleet;",
    )
    .unwrap();
    let mut fleet = hub.connect_as("fleet");
    let lease = |c: &mut Client, wanted: i32, cluster: i64, lease_ms: i64, covered: i64| {
        c.query_one(
            "SELECT outcome, expires::text, holder
               FROM snowflake.snowflake_registry_lease('checks', 'twitter', 1288834974657, 1, 41,
                        10, 12, false, $1, $2, 'n', $3, $4)",
            &[&wanted, &cluster, &lease_ms, &covered],
        )
    };
    let ServerError { code, .. } = db_error(&lease(&mut fleet, 5, 1, 10_000, -5).unwrap_err());
    assert_eq!(code, "22023");
    let row = lease(&mut fleet, 5, 1, 3_600_000, 1).unwrap();
    assert_eq!(row.get::<_, String>(0), "granted");
    let first: String = row.get(1);
    let row = lease(&mut fleet, 5, 1, 1_000, 1).unwrap();
    assert_eq!(row.get::<_, String>(0), "granted");
    assert_eq!(row.get::<_, String>(1), first, "a renewal moved the expiry earlier");
    // Another cluster asking for it: held, by whom only for those who may know.
    let row = lease(&mut fleet, 5, 2, 10_000, 1).unwrap();
    assert_eq!(row.get::<_, String>(0), "held");
    assert_eq!(row.get::<_, Option<String>>(2), None);
    h.batch_execute("GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_lease TO watcher")
        .unwrap();
    for mut c in [hub.connect_as("watcher"), hub.connect()] {
        let row = lease(&mut c, 5, 2, 10_000, 1).unwrap();
        assert_eq!(row.get::<_, String>(0), "held");
        let holder: String = row.get(2);
        assert!(holder.starts_with("cluster 1 (n)"), "{holder}");
    }
    // Nothing recorded below zero, whatever was asked.
    let lowest: i64 = h.scalar(
        "SELECT min(least(covered_until_ms, start_above_ms)) FROM snowflake.snowflake_registry",
    );
    assert!(lowest >= 0);
}

/// A namespace is one id space, of one layout, known by its fields: a member of Twitter's
/// layout and one of a custom layout with Twitter's epoch and widths (the same ids) share its
/// worker ids; a member of discord (Twitter's widths, another epoch: the same ids years apart)
/// is refused, naming both layouts; and of two members of different layouts that start a new
/// namespace at once, exactly one is leased. 0.3.0 leased worker id 0 to all three.
#[test]
fn a_namespace_is_one_id_space_of_one_layout_known_by_its_fields() {
    let (hub, mut h) = registry("reg_hub_layouts");
    let twin = ["snowflake.layout = custom", "snowflake.epoch = '2010-11-04 01:42:54.657+00'"];
    let a = member("reg_layout_twitter", &hub, "fleet", &[]);
    a.start();
    let mut ca = a.connect_ext();
    let id = first_id(&mut ca, Duration::from_secs(30));
    let wa = worker_id_of(&mut ca, id);
    let b = member("reg_layout_twin", &hub, "fleet", &twin);
    b.start();
    let mut cb = b.connect_ext();
    let id = first_id(&mut cb, Duration::from_secs(30));
    let wb = worker_id_of(&mut cb, id);
    assert_ne!(wa, wb, "Twitter and its custom twin make the same ids: one worker id space");
    let c = member("reg_layout_discord", &hub, "fleet", &["snowflake.layout = discord"]);
    c.start();
    let mut cc = c.connect_ext();
    let (message, detail) =
        wait_for_refusal(&mut cc, "makes ids of layout", Duration::from_secs(30));
    assert!(message.contains("holds no worker id lease"), "{message}");
    assert!(
        detail.contains("twitter (41 bits of 1 ms since 2010-11-04T01:42:54.657Z")
            && detail.contains("discord (41 bits of 1 ms since 2015-01-01T00:00:00.000Z"),
        "{detail}"
    );
    let e = cc.query_one("SELECT snowflake_next()", &[]).unwrap_err();
    let hint = e.as_db_error().unwrap().hint().unwrap_or_default().to_string();
    assert!(hint.contains("namespace of their own"), "{hint}");
    let held: i64 =
        h.scalar("SELECT count(*) FROM snowflake.snowflake_registry WHERE namespace = 'default'");
    assert_eq!(held, 2);

    // Two first members of a new namespace, of different layouts, at once.
    let fresh = "snowflake.registry_namespace = 'fresh'";
    let d = member("reg_layout_race_d", &hub, "fleet", &[fresh]);
    let e = member("reg_layout_race_e", &hub, "fleet", &[fresh, "snowflake.layout = discord"]);
    std::thread::scope(|s| {
        s.spawn(|| d.start());
        s.spawn(|| e.start());
    });
    let outcome = |m: &Cluster| -> Result<(), String> {
        let mut c = m.connect_ext();
        let mut seen = Err(String::new());
        poll(Duration::from_secs(30), Duration::from_millis(100), || {
            match c.query_one("SELECT snowflake_next()", &[]) {
                Ok(_) => {
                    seen = Ok(());
                    Ok(())
                }
                Err(err) => {
                    let db = err.as_db_error().ok_or(format!("{err}"))?;
                    let (message, detail) =
                        (db.message().to_string(), db.detail().unwrap_or_default().to_string());
                    if detail.contains("makes ids of layout") {
                        seen = Err(detail);
                        Ok(())
                    } else {
                        Err(format!("{message}: {detail}"))
                    }
                }
            }
        });
        seen
    };
    let results = [outcome(&d), outcome(&e)];
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "exactly one layout takes the new namespace: {results:?}"
    );
}

/// The registry's database may belong to a role that is not the fleet's administrator. Where
/// its pg_snowflake is 0.3.0 (or missing), nothing keeps that role from making a schema named
/// `snowflake` with a lease function of its own, which would answer every member "worker id 0
/// for a day": members take no lease from it, and do not even call it (the statement that would
/// checks first that the function is pg_snowflake's, in a schema a superuser owns). Against the
/// same registry without it, members say that it runs 0.3.0 and must be updated first.
#[test]
fn members_take_no_lease_from_an_impostor_and_ask_a_0_3_0_registry_to_update() {
    let (hub, mallory, mut su) = Mallory::start("reg_hub_impostor", &[], "reg");
    su.batch_execute(
        "CREATE EXTENSION pg_snowflake VERSION '0.3.0';
         CREATE ROLE fleet LOGIN;
         GRANT EXECUTE ON FUNCTION snowflake_registry_lease TO fleet;",
    )
    .unwrap();
    let old = member_in("reg_impostor_old", hub.port, "fleet", "reg", &[]);
    old.start();
    let (_, detail) = wait_for_refusal(&mut old.connect_ext(), "0.3.0", Duration::from_secs(30));
    assert!(detail.contains("update it there first"), "{detail}");

    mallory.connect().batch_execute("CREATE SCHEMA snowflake").unwrap();
    mallory.plant_in("snowflake");
    let members: Vec<Cluster> = (0..2)
        .map(|i| member_in(&format!("reg_impostor_{i}"), hub.port, "fleet", "reg", &[]))
        .collect();
    for m in &members {
        m.start();
        let (message, detail) = wait_for_refusal(
            &mut m.connect_ext(),
            "not pg_snowflake's own",
            Duration::from_secs(30),
        );
        assert!(message.contains("holds no worker id lease"), "{message}");
        assert!(detail.contains("no lease is taken from it"), "{detail}");
    }
    let (what, superuser) = mallory.caught();
    assert_eq!(what, Vec::<String>::new(), "the impostor was called");
    assert!(!superuser);
}

/// A rolling upgrade updates the registry first: a member of 0.3.0 (its package's library, in a
/// copy of this major's server) then leases from a registry of this release through the old
/// signature, beside a member of this release in the same namespace, each its own worker id; a
/// member of 0.3.0 of another layout is refused, and says so. On 17 only: the package of 0.3.0
/// costs minutes to build, and tests/packaging/repo.rs builds the same one.
#[test]
fn a_member_of_0_3_0_leases_from_a_registry_of_this_release() {
    let major = major_under_test();
    if major != "17" {
        eprintln!("a member of 0.3.0 is tested on PostgreSQL 17 (PostgreSQL {major} here)");
        return;
    }
    let old_server = common::release::server_with_0_3_0("reg_0_3_0_server");
    let (hub, mut h) = registry("reg_hub_0_3_0");
    // What members of 0.3.0 call (an update from 0.3.0 grants it to the roles that had it).
    h.batch_execute(
        "GRANT EXECUTE ON FUNCTION public.snowflake_registry_lease(text, text, integer, integer,
                                   bigint, text, bigint, bigint) TO fleet",
    )
    .unwrap();
    let conf = member_conf(hub.port, "fleet", "postgres", &[]);
    let conf: Vec<&str> = conf.iter().map(String::as_str).collect();
    let old = Cluster::init_with("reg_0_3_0_member", &old_server, &[], &conf);
    old.start();
    let mut co = old.connect_ext();
    let version: String =
        co.scalar("SELECT extversion FROM pg_extension WHERE extname = 'pg_snowflake'");
    assert_eq!(version, "0.3.0", "the member runs 0.3.0");
    let id = first_id(&mut co, Duration::from_secs(30));
    let w_old = worker_id_of(&mut co, id);
    let new = member("reg_0_4_0_member", &hub, "fleet", &[]);
    new.start();
    let mut cn = new.connect_ext();
    let id = first_id(&mut cn, Duration::from_secs(30));
    let w_new = worker_id_of(&mut cn, id);
    assert_ne!(w_old, w_new);
    let held: i64 = h.scalar(
        "SELECT count(*) FROM snowflake.snowflake_registry
              WHERE namespace = 'default' AND expires > now()",
    );
    assert_eq!(held, 2);

    // 0.3.0's member of another layout in the same namespace.
    let discord = Cluster::init_with(
        "reg_0_3_0_discord",
        &old_server,
        &[],
        &[conf.as_slice(), &["snowflake.layout = discord"]].concat(),
    );
    discord.start();
    let (_, detail) = wait_for_refusal(
        &mut discord.connect_ext(),
        "makes ids of layout",
        Duration::from_secs(30),
    );
    assert!(detail.contains("a namespace of their own") || detail.contains("discord"), "{detail}");
}

/// A holder of the members' role can keep a transaction open in the registry's database after
/// its calls: asking for worker ids that others hold (which takes no lock on their rows), and
/// taking a free one (whose new row stays uncommitted). No member waits on it: the members
/// renew through it and keep making ids past their first lease, and a new member leases a
/// worker id at once, passing over the one that transaction holds. (0.3.0 locked the held rows
/// it was asked for, and every member's renewal then failed on its lock timeout.)
#[test]
fn an_open_transaction_of_the_members_role_holds_no_member_up() {
    let (hub, _h) = registry("reg_hub_locks");
    let a = member("reg_locks_a", &hub, "fleet", &[]);
    a.start();
    let mut ca = a.connect_ext();
    let id = first_id(&mut ca, Duration::from_secs(30));
    let wa = worker_id_of(&mut ca, id);
    let mut attacker = hub.connect_as("fleet_b");
    let mut tx = attacker.transaction().unwrap();
    let now_ms = || {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as i64
    };
    let lease = |tx: &mut postgres::Transaction, wanted: Option<i32>| -> (String, Option<i32>) {
        let row = tx
            .query_one(
                "SELECT outcome, worker_id FROM snowflake.snowflake_registry_hold('default',
                     'twitter', 1288834974657, 1, 41, 10, 12, false, $1, NULL, 424242,
                     'attacker', 60000, $2, repeat('a', 64), NULL,
                     md5(random()::text) || md5(random()::text))",
                &[&wanted, &now_ms()],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(lease(&mut tx, Some(wa)).0, "held");
    let (outcome, taken) = lease(&mut tx, None);
    assert_eq!(outcome, "granted");
    // While the transaction stays open: A renews past its first lease (10 s).
    let renewed =
        |c: &mut Client| registry_stats(c)["renewed"].as_str().unwrap_or_default().to_string();
    let first = renewed(&mut ca);
    let started = std::time::Instant::now();
    let mut seen = std::collections::BTreeSet::from([first]);
    poll(Duration::from_secs(25), Duration::from_millis(200), || {
        seen.insert(renewed(&mut ca));
        (seen.len() >= 4).then_some(()).ok_or(format!("A renewed {} times", seen.len() - 1))
    });
    assert!(started.elapsed() > Duration::from_secs(9));
    ca.query_one("SELECT snowflake_next()", &[]).unwrap();
    // A new member leases at once, another worker id than the one left uncommitted.
    let c = member("reg_locks_c", &hub, "fleet", &[]);
    let t = std::time::Instant::now();
    c.start();
    let mut cc = c.connect_ext();
    let id = first_id(&mut cc, Duration::from_secs(4));
    let wc = worker_id_of(&mut cc, id);
    eprintln!("a new member leased worker id {wc} {:?} after its start", t.elapsed());
    assert_ne!(Some(wc), taken);
    assert_ne!(wc, wa);
    tx.rollback().unwrap();
}

/// A registry dumped at 0.3.0 keeps its coverage when restored where this release is installed,
/// the way the guide says: create the extension at 0.3.0 in the new database first (pg_dump's
/// CREATE EXTENSION then changes nothing, and its data goes into 0.3.0's table), then update.
#[test]
fn a_registry_dumped_at_0_3_0_is_restored_at_0_3_0_and_updated() {
    let hub = Cluster::start_new("reg_dump_0_3_0", &[]);
    let mut c = hub.connect();
    c.batch_execute("CREATE DATABASE old").unwrap();
    c.batch_execute("CREATE DATABASE new").unwrap();
    let mut old = hub.connect_db("postgres", "old");
    old.batch_execute(
        "CREATE EXTENSION pg_snowflake VERSION '0.3.0';
         SELECT snowflake_registry_lease('default', 'twitter', 1023, NULL, 1, 'a', 60000, 1700000000000);
         SELECT snowflake_registry_lease('default', 'twitter', 1023, NULL, 2, 'b', 60000, 1700000000001);",
    )
    .unwrap();
    let dump = scratch_dir("reg_dump_0_3_0_file").join("old.sql");
    check(
        as_postgres(&hub.bin("pg_dump"), &[])
            .args(["-h", "127.0.0.1", "-p", &hub.port.to_string(), "-U", "postgres", "-f"])
            .arg(&dump)
            .arg("old")
            .output()
            .unwrap(),
        "pg_dump",
    );
    let mut new = hub.connect_db("postgres", "new");
    new.batch_execute("CREATE EXTENSION pg_snowflake VERSION '0.3.0'").unwrap();
    check(
        as_postgres(&hub.bin("psql"), &[])
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &hub.port.to_string(),
                "-U",
                "postgres",
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                "new",
                "-f",
            ])
            .arg(&dump)
            .output()
            .unwrap(),
        "psql -f of the dump",
    );
    new.batch_execute("ALTER EXTENSION pg_snowflake UPDATE").unwrap();
    let rows: Vec<String> = new.column(
        "SELECT namespace || ' ' || worker_id || ' ' || covered_until_ms
           FROM snowflake.snowflake_registry ORDER BY worker_id",
    );
    assert_eq!(rows, ["default 0 1700000000000", "default 1 1700000000001"]);
}

/// The registry's database may belong to a role that sets its search_path, with a type of its
/// own named `text` on it: the member's check of the lease function names every type by schema,
/// so it still knows pg_snowflake's own function (and leases), instead of taking it for another
/// and refusing ids with a false reason.
#[test]
fn a_registry_owners_search_path_does_not_fool_the_members_check() {
    let hub = Cluster::start_new("reg_hub_path", &[]);
    let mallory = Mallory::new(&hub, "reg");
    mallory
        .connect_admin()
        .batch_execute(
            "CREATE EXTENSION pg_snowflake;
             CREATE ROLE fleet LOGIN;
             GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_hold TO fleet;",
        )
        .unwrap();
    mallory
        .connect()
        .batch_execute(
            "CREATE DOMAIN m.text AS pg_catalog.text;
             CREATE DOMAIN m.int8 AS pg_catalog.int8;
             ALTER DATABASE reg SET search_path = m, pg_catalog;",
        )
        .unwrap();
    let m = member_in("reg_path_member", hub.port, "fleet", "reg", &[]);
    m.start();
    first_id(&mut m.connect_ext(), Duration::from_secs(30));
}
