//! Copies of a member's data directory under one registry (src/coordination/identity.rs). Every copy
//! carries its original's system identifier and cached lease; in 0.5.0 a copy started beside its
//! original leased the same worker id, and made the same ids: half of 400,000 ids twice.
//!
//! Each case here moves every server past one and the same id, a few seconds ahead of the
//! clock, then has each make 200,000 ids at once (`made_beside`): two servers with one worker id
//! make the same ids then, so no id twice means no worker id shared.
//! - a cold copy (the directory copied while its member is stopped) started beside it, four copies
//!   of one directory, a hot copy (`pg_basebackup` started as a primary), and a standby promoted
//!   while its primary goes on: each takes a worker id of its own, says which server it did not
//!   take from, and the registry records it; the original goes on with its own, through a clean
//!   restart and a `kill -9`;
//! - a clean shutdown gives the lease back, and its next holder starts above every id made (and
//!   says why it waits, when those ids ran ahead of the clock);
//! - a crash loop resumes its worker id at every start, in a namespace of four worker ids;
//! - the members' role cannot renew, take or keep another start's lease;
//! - a registry that lost a member's last renewal renews it by its secret before;
//! - with the registry down, a copy makes no id (saying why), and the original restarts with its
//!   cached lease.
//!
//! Majors: 18. The registry's functions and the member's worker are the same code on every major
//! (tests/registry/registry.rs runs the registry on each); 18's run is the shortest of the five.
#![cfg(not(feature = "pg_test"))]

use common::registry::{member, registry};
use common::*;
use std::collections::HashSet;
use std::time::{Duration, Instant};
use testkit as common;

/// Ids each server of `servers` makes at once, `n` each, after all moved past one and the same
/// id 4 s ahead of the clock: (ids made, ids made more than once).
fn made_beside(servers: &[&Cluster], n: i64) -> (usize, usize) {
    let mut first = servers[0].connect_ext();
    let floor: i64 = first.scalar("SELECT snowflake_compose(now() + interval '4 s', 0, 0)");
    let mut clients: Vec<Client> = servers.iter().map(|s| s.connect_ext()).collect();
    for c in clients.iter_mut() {
        c.execute("SELECT snowflake_advance_past($1)", &[&floor]).unwrap();
    }
    let made =
        ids_at_once(&mut clients, &format!("SELECT snowflake_next() FROM generate_series(1, {n})"));
    let all: usize = made.iter().map(Vec::len).sum();
    let distinct: HashSet<i64> = made.into_iter().flatten().collect();
    (all, all - distinct.len())
}

/// The worker id `server` makes ids with, once it makes them, and how long that took.
fn worker_id(server: &Cluster) -> (i32, Duration) {
    let started = Instant::now();
    let mut c = server.connect_ext();
    let id = first_id(&mut c, Duration::from_secs(60));
    (worker_id_of(&mut c, id), started.elapsed())
}

/// A member of `hub`'s registry, started, that has made an id.
fn running_member(name: &str, hub: &Cluster, conf: &[&str]) -> Cluster {
    let m = member(name, hub, "fleet", conf);
    m.start();
    worker_id(&m);
    m
}

/// What the copy says of the server whose worker id it did not take, and what the registry
/// recorded: both name `original`'s node.
fn copy_is_told(copy: &Cluster, hub: &Cluster, original: &Cluster) {
    let node = format!(":{}", original.port);
    copy.await_log_line(0, &["WARNING:", "another server of this cluster", &node]);
    let mut c = copy.connect();
    let said = registry_stats(&mut c)["copy_of"].as_str().unwrap_or_default().to_string();
    assert!(said.contains(&node), "snowflake_stats() names no original: {said}");
    let recorded: i64 = hub.connect().scalar_with(
        "SELECT count(*) FROM snowflake.snowflake_registry WHERE copy_of LIKE '%' || $1 || '%'",
        &[&node],
    );
    assert_eq!(recorded, 1, "the registry recorded no copy of {node}");
}

#[test]
fn a_cold_copy_beside_its_original_takes_its_own_worker_id_and_the_original_keeps_its_own() {
    let (hub, _) = registry("copy_cold_hub");
    let original = running_member("copy_cold_m", &hub, &[]);
    let (w, _) = worker_id(&original);
    original.stop("fast");
    let copy = original.copy("copy_cold_c");
    original.start();
    copy.start();
    let (wc, waited) = worker_id(&copy);
    let (wo, _) = worker_id(&original);
    println!(
        "a cold copy: the original on worker id {wo} (it had {w}), the copy on {wc}, its first id \
         {} ms after its start",
        waited.as_millis()
    );
    assert_eq!(wo, w, "the original lost its worker id");
    assert_ne!(wc, w, "the copy took its original's worker id");
    copy_is_told(&copy, &hub, &original);
    let (made, twice) = made_beside(&[&original, &copy], 200_000);
    println!("{made} ids made beside each other, {twice} twice");
    assert_eq!(twice, 0);
    // The original keeps its worker id through a clean restart and a kill -9.
    original.restart("fast");
    assert_eq!(worker_id(&original).0, w, "a clean restart took another worker id");
    original.crash();
    original.start();
    assert_eq!(worker_id(&original).0, w, "a restart after kill -9 took another worker id");
    let (made, twice) = made_beside(&[&original, &copy], 200_000);
    assert_eq!((made, twice), (400_000, 0));
}

/// A clean shutdown gives the lease back (src/coordination/registry/worker.rs, `release`): a member that asks
/// for that very worker id (`snowflake.worker_id`), refused while the lease ran, takes it at once
/// instead of 5 minutes later, and starts above every id made under it (the original's ids moved
/// 8 s ahead of the clock: another cluster's state file says nothing of them, only the registry's
/// coverage does). The original, started again, takes another. A registry worker terminated
/// alone gives nothing back (only a stopping postmaster does), and ids go on.
#[test]
fn a_clean_shutdown_gives_the_lease_back_and_its_next_holder_starts_above_every_id_made() {
    let (hub, _) = registry("copy_release_hub");
    let original = running_member("copy_release_m", &hub, &[]);
    let (w, _) = worker_id(&original);
    let mut c = original.connect_ext();
    // The worker alone ended (SIGTERM, as pg_terminate_backend sends): no release, no pause in
    // the ids.
    let worker = original.process_titled("pg_snowflake registry").expect("no registry worker");
    let renewed = registry_stats(&mut c)["renewed"].clone();
    std::process::Command::new("kill").args(["-TERM", &worker.to_string()]).status().unwrap();
    poll(Duration::from_secs(10), Duration::from_millis(10), || {
        (!std::path::Path::new(&format!("/proc/{worker}")).exists())
            .then_some(())
            .ok_or("the registry's worker is still there".into())
    });
    c.query_one("SELECT snowflake_next()", &[])
        .expect("ids stopped when the registry's worker alone was terminated");
    // Its successor, started by the postmaster 5 s later, renews the lease.
    poll(Duration::from_secs(30), Duration::from_millis(50), || {
        let now = registry_stats(&mut c)["renewed"].clone();
        (now != renewed).then_some(()).ok_or("not renewed by a new worker yet".into())
    });
    let ahead: i64 = c.scalar("SELECT snowflake_compose(now() + interval '8 s', 0, 0)");
    c.execute("SELECT snowflake_advance_past($1)", &[&ahead]).unwrap();
    let last: i64 = c.scalar("SELECT max(snowflake_next()) FROM generate_series(1, 1000)");
    drop(c);
    // Another member, which wants that worker id: refused while the original holds it.
    let wants = member("copy_release_w", &hub, "fleet", &[&format!("snowflake.worker_id = {w}")]);
    wants.start();
    let mut cw = wants.connect_ext();
    wants.await_log_line(0, &["WARNING:", &format!("worker id {w} of namespace")]);
    assert_eq!(next_error(&mut cw).code, "55000");
    original.stop("fast");
    let stopped = Instant::now();
    original.await_log_line(0, &["LOG:", &format!("worker id {w} is given back to the registry")]);
    let (ended, covered_ahead_ms): (bool, i64) = {
        let row = hub
            .connect()
            .query_one(
                "SELECT expires <= now(), covered_until_ms - (extract(epoch FROM now()) * 1000)::int8
                   FROM snowflake.snowflake_registry WHERE worker_id = $1",
                &[&w],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    println!(
        "given back: the lease ended at once, its coverage {covered_ahead_ms} ms ahead of the \
         registry's clock (a lease runs 300,000 ms)"
    );
    assert!(ended, "the lease given back still runs");
    assert!(covered_ahead_ms < 60_000, "the coverage stayed a lease ahead: {covered_ahead_ms} ms");
    let first = first_id(&mut cw, Duration::from_secs(60));
    println!(
        "the member that wanted worker id {w} made its first id {} ms after the original stopped",
        stopped.elapsed().as_millis()
    );
    assert_eq!(worker_id_of(&mut cw, first), w);
    assert!(first > last, "its first id {first} is not above the original's last {last}");
    // The original again, beside the new holder of its worker id: another of its own.
    original.start();
    let (wo, _) = worker_id(&original);
    assert_ne!(wo, w, "the original took back the worker id given back");
    let (made, twice) = made_beside(&[&original, &wants], 200_000);
    println!("{made} ids made beside each other, {twice} twice");
    assert_eq!(twice, 0);
}

/// A worker id given back while its holder's ids ran ahead of the clock (here 9 s, within
/// `snowflake.max_drift`) makes its next holder, whose `snowflake.max_drift` is 1 s, wait for the
/// clock: it says that it starts above its previous holder's ids, not that its clock was set back.
#[test]
fn a_worker_id_given_back_ahead_of_the_clock_says_why_its_next_holder_waits() {
    let (hub, _) = registry("copy_ahead_hub");
    let original = running_member("copy_ahead_m", &hub, &[]);
    let (w, _) = worker_id(&original);
    let mut c = original.connect_ext();
    let ahead: i64 = c.scalar("SELECT snowflake_compose(now() + interval '9 s', 0, 0)");
    c.execute("SELECT snowflake_advance_past($1)", &[&ahead]).unwrap();
    drop(c);
    original.stop("fast");
    original.await_log_line(0, &["LOG:", &format!("worker id {w} is given back to the registry")]);
    let conf = [
        format!("snowflake.worker_id = {w}"),
        "snowflake.max_drift = '1s'".to_string(),
        "snowflake.drift_wait = '100ms'".to_string(),
    ];
    let next =
        member("copy_ahead_n", &hub, "fleet", &conf.iter().map(String::as_str).collect::<Vec<_>>());
    next.start();
    let mut cn = next.connect_ext();
    let said = wait_for_error(
        &mut cn,
        "SELECT snowflake_next()",
        Duration::from_millis(20),
        "an id before the clock reached its previous holder's ids",
        |error| error.message.contains("previous holder"),
    );
    println!("the next holder, before the clock gets there: {said:?}");
    assert_eq!(said.code, "55000");
    assert!(said.detail.contains(&format!("worker id {w}")), "{said:?}");
    // And once the clock got there, ids above the original's.
    let first = first_id(&mut cn, Duration::from_secs(30));
    assert!(first > ahead, "{first} is not above {ahead}");
}

/// Whoever knows a start's place (local users of its machine can read what it is made of) can
/// resume its lease as a new start in place would, but a lease given back never records less
/// than the starts before it were granted: the start it cut off makes ids up to that coverage
/// until its next renewal, and the worker id's next holder starts above it.
#[test]
fn a_lease_resumed_by_its_place_and_given_back_keeps_the_coverage_of_the_start_before() {
    let (hub, _) = registry("copy_resumed_hub");
    let mut c = hub.connect_as("fleet");
    let hex = |b: u8| format!("{b:02x}").repeat(32);
    let far: i64 = c.scalar("SELECT (extract(epoch FROM now()) * 1000)::int8 + 60000");
    let mut hold = |secret: Option<u8>, next: u8, lease_ms: i64, covered: i64| -> String {
        c.query_one(
            "SELECT outcome FROM snowflake.snowflake_registry_hold('resumed', 'twitter',
                1288834974657, 1, 41, 10, 12, false, NULL, NULL, 42, 'victim', $4, $5, $1, $2,
                $3)",
            &[&hex(7), &secret.map(hex), &hex(next), &lease_ms, &covered],
        )
        .unwrap()
        .get(0)
    };
    assert_eq!(hold(None, 1, 60_000, far), "granted");
    let mut h = hub.connect();
    let recorded: i64 = h.scalar(
        "SELECT covered_until_ms FROM snowflake.snowflake_registry WHERE node_name = 'victim'",
    );
    // Resumed by its place, as a new start there, then given back with a coverage of 0.
    assert_eq!(hold(None, 2, 60_000, 1), "granted");
    assert_eq!(hold(Some(2), 3, 0, 0), "released");
    let after: i64 = h.scalar(
        "SELECT covered_until_ms FROM snowflake.snowflake_registry WHERE node_name = 'victim'",
    );
    assert!(after >= recorded, "the coverage came down from {recorded} to {after}");
}

#[test]
fn four_servers_started_from_one_copied_directory_each_take_their_own_worker_id() {
    let (hub, _) = registry("copy_four_hub");
    let original = running_member("copy_four_m", &hub, &[]);
    original.stop("fast");
    let copies: Vec<Cluster> = (1..=4).map(|i| original.copy(&format!("copy_four_c{i}"))).collect();
    original.start();
    for c in &copies {
        c.start();
    }
    let mut servers: Vec<&Cluster> = vec![&original];
    servers.extend(copies.iter());
    let ids: Vec<i32> = servers.iter().map(|s| worker_id(s).0).collect();
    println!("the original and four copies of its directory: worker ids {ids:?}");
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 5, "{ids:?}");
    let (made, twice) = made_beside(&servers, 200_000);
    println!("{made} ids made beside each other, {twice} twice");
    assert_eq!(twice, 0);
}

#[test]
fn a_hot_copy_started_as_a_primary_takes_its_own_worker_id() {
    let (hub, _) = registry("copy_hot_hub");
    let original = running_member("copy_hot_m", &hub, &[]);
    let (w, _) = worker_id(&original);
    let copy = original.basebackup("copy_hot_c");
    std::fs::remove_file(copy.data().join("standby.signal")).unwrap();
    copy.start();
    let (wc, waited) = worker_id(&copy);
    println!(
        "a hot copy (pg_basebackup) started as a primary: worker id {wc} beside {w}, its first \
         id {} ms after its start",
        waited.as_millis()
    );
    assert_ne!(wc, w);
    copy_is_told(&copy, &hub, &original);
    assert_eq!(made_beside(&[&original, &copy], 200_000).1, 0);
}

#[test]
fn a_standby_promoted_while_its_primary_goes_on_takes_its_own_worker_id_and_both_say_so() {
    let (hub, _) = registry("copy_split_hub");
    let primary = running_member("copy_split_p", &hub, &[]);
    let (w, _) = worker_id(&primary);
    let standby = primary.basebackup("copy_split_s");
    standby.start();
    wait_for_replay(&mut primary.connect(), &mut standby.connect());
    standby.promote();
    let (ws, waited) = worker_id(&standby);
    println!(
        "a standby promoted beside its primary (a split brain): worker id {ws} beside {w}, its \
         first id {} ms after the promotion",
        waited.as_millis()
    );
    assert_ne!(ws, w);
    assert_eq!(worker_id(&primary).0, w, "the primary lost its worker id");
    copy_is_told(&standby, &hub, &primary);
    // The primary learns at its next renewal that another start of its cluster runs beside it.
    let node = format!(":{}", standby.port);
    primary.await_log_line(0, &["WARNING:", "another server of this cluster", &node]);
    assert_eq!(made_beside(&[&primary, &standby], 200_000).1, 0);
}

/// A server that crashes every few seconds resumes its worker id at every start (its data
/// directory, at its place, whose last start has ended): in a namespace of four worker ids, ten
/// crashes take one, and three other members still lease.
#[test]
fn a_crash_loop_resumes_its_worker_id_and_leaves_a_small_namespace_free() {
    let (hub, _) = registry("copy_loop_hub");
    let small = [
        "snowflake.layout = custom",
        "snowflake.time_bits = 41",
        "snowflake.worker_bits = 2",
        "snowflake.sequence_bits = 12",
        "snowflake.registry_namespace = 'four'",
    ];
    let looping = running_member("copy_loop_m", &hub, &small);
    let (w, _) = worker_id(&looping);
    for crash in 1..=10 {
        looping.crash();
        looping.start();
        let (again, waited) = worker_id(&looping);
        assert_eq!(again, w, "crash {crash} took another worker id");
        if crash == 10 {
            println!(
                "ten crashes: worker id {w} each time, the last id {} ms after start",
                waited.as_millis()
            );
        }
    }
    let others: Vec<Cluster> =
        (1..=3).map(|i| running_member(&format!("copy_loop_o{i}"), &hub, &small)).collect();
    let mut ids: Vec<i32> = others.iter().map(|o| worker_id(o).0).collect();
    ids.push(w);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 4, "{ids:?}");
}

/// The role members connect as is shared by the fleet (its password is on every member), and
/// 0.5.0 let it renew any member's lease by naming its system identifier and worker id: the
/// lease then went to the caller's name. Now it takes no lease another start holds, whatever it
/// names: neither by the system identifier (through 0.5.0's function too) nor by a guessed place
/// or secret; and the member goes on renewing.
#[test]
fn the_members_role_cannot_renew_take_or_keep_another_servers_lease() {
    let (hub, _) = registry("copy_role_hub");
    let m = running_member("copy_role_m", &hub, &[]);
    let (w, _) = worker_id(&m);
    let sysid: i64 = m.connect().scalar("SELECT system_identifier FROM pg_control_system()");
    let mut fleet = hub.connect_as("fleet");
    let hex = |b: u8| format!("{b:02x}").repeat(32);
    let hold = |c: &mut Client, place: &str, secret: Option<&str>| -> (String, Option<i32>) {
        let row = c
            .query_one(
                "SELECT outcome, worker_id FROM snowflake.snowflake_registry_hold('default',
                    'twitter', 1288834974657, 1, 41, 10, 12, false, $1, NULL, $2, 'mallory',
                    60000, 1, $3, $4, $5)",
                &[&w, &sysid, &place, &secret, &hex(9)],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(hold(&mut fleet, &hex(1), None).0, "held", "taken with a guessed place");
    assert_eq!(hold(&mut fleet, &hex(1), Some(&hex(2))).0, "lost", "renewed with a guessed secret");
    // 0.5.0's way, by system identifier alone, is not open through the function of 0.6.0 (0.6.0's
    // review found it open with a NULL place): only through snowflake_registry_lease(), which
    // the administrator revokes once no member of 0.5.0 is left.
    let refused = |c: &mut Client, node: &str, place: Option<&str>| -> String {
        c.query_one(
            "SELECT * FROM snowflake.snowflake_registry_hold('default', 'twitter',
                1288834974657, 1, 41, 10, 12, false, $1, NULL, $2, $3, 60000, 1, $4, NULL, $5)",
            &[&w, &sysid, &node, &place, &place.map(|_| hex(9))],
        )
        .map(|r| format!("{:?}", r.get::<_, String>(0)))
        .unwrap_or_else(|e| e.code().map(|c| c.code().to_string()).unwrap_or_default())
    };
    assert_eq!(refused(&mut fleet, "mallory", None), "22004", "renewed by system identifier");
    // A node name goes into other starts' answers, which a member refuses past 512 bytes: one of
    // 600 bytes denied every start of the cluster its renewals (0.6.0's review).
    assert_eq!(
        refused(&mut fleet, &"x".repeat(600), Some(&hex(3))),
        "22023",
        "a node name of 600 bytes"
    );
    grant_legacy(&hub);
    let legacy: String = fleet.scalar_with(
        "SELECT outcome FROM snowflake.snowflake_registry_lease('default', 'twitter',
            1288834974657, 1, 41, 10, 12, false, $1, $2, 'mallory', 60000, 1)",
        &[&w, &sysid],
    );
    assert_eq!(legacy, "held", "renewed through 0.5.0's function by the system identifier");
    let holder: String = hub.connect().scalar_with(
        "SELECT node_name FROM snowflake.snowflake_registry WHERE worker_id = $1",
        &[&w],
    );
    assert_ne!(holder, "mallory");
    // The member still renews: its lease is in force, and its worker id its own.
    let mut c = m.connect();
    let renewed = registry_stats(&mut c)["renewed"].as_str().unwrap_or_default().to_string();
    poll(Duration::from_secs(20), Duration::from_millis(200), || {
        let now = registry_stats(&mut c)["renewed"].as_str().unwrap_or_default().to_string();
        (now != renewed).then_some(()).ok_or("the member did not renew".into())
    });
    assert_eq!(worker_id(&m).0, w);
}

/// The registry keeps the hash of one secret for a lease, replaced at each renewal by the next
/// one the start sends: a secret once replaced renews nothing (`lost`). So two servers holding
/// one secret (a machine cloned with its memory, a standby's process image) are told apart at
/// the next renewal of either, and the one that renews second learns it lost the lease.
#[test]
fn a_replaced_secret_renews_nothing() {
    let (hub, _) = registry("copy_secret_hub");
    let mut c = hub.connect_as("fleet");
    let hex = |b: u8| format!("{b:02x}").repeat(32);
    let mut hold = |secret: Option<u8>, next: u8| -> (String, Option<i32>) {
        let row = c
            .query_one(
                "SELECT outcome, worker_id FROM snowflake.snowflake_registry_hold('rotation',
                    'twitter', 1288834974657, 1, 41, 10, 12, false, NULL, NULL, 42, 'clone',
                    60000, 1, $1, $2, $3)",
                &[&hex(7), &secret.map(hex), &hex(next)],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    let (first, w) = hold(None, 1);
    assert_eq!(first, "granted");
    assert_eq!(hold(Some(1), 2), ("granted".into(), w), "renewed with its secret");
    // The answer to a renewal may be lost after the registry took the next secret: the start
    // sends the same pair again, and the next one is accepted.
    assert_eq!(hold(Some(1), 2), ("granted".into(), w), "sent again after a lost answer");
    assert_eq!(hold(Some(2), 3), ("granted".into(), w), "renewed with the next one");
    assert_eq!(hold(Some(1), 4).0, "lost", "a replaced secret renewed the lease");
    assert_eq!(hold(Some(2), 4).0, "lost", "a replaced secret renewed the lease");
    assert_eq!(hold(Some(3), 4), ("granted".into(), w), "the current one renews");
}

/// 0.5.0's function, for members of 0.5.0 during a rolling upgrade: granted here as an
/// administrator would while such members remain.
/// A registry that lost a member's last renewal (it failed over to a standby that had not
/// received it; here the row's secret is set back to the one before, as that standby has it)
/// renews the member by its secret before last: the member goes on with its worker id. 0.6.0
/// before this answered `lost`, and the member refused ids until it was restarted.
#[test]
fn a_registry_that_lost_the_last_renewal_renews_by_the_secret_before() {
    let (hub, _) = registry("copy_rollback_hub");
    let m = running_member("copy_rollback_m", &hub, &["snowflake.registry_lease = '10s'"]);
    let (w, _) = worker_id(&m);
    let mut h = hub.connect();
    let secret = |h: &mut Client| -> String {
        h.scalar_with("SELECT secret FROM snowflake.snowflake_registry WHERE worker_id = $1", &[&w])
    };
    // A renewal, and then the row as it was before it.
    let before = secret(&mut h);
    poll(Duration::from_secs(30), Duration::from_millis(5), || {
        let now = secret(&mut h);
        if now == before {
            return Err("no renewal yet".into());
        }
        let n = h
            .execute(
                "UPDATE snowflake.snowflake_registry SET secret = $1 WHERE worker_id = $2 \
                 AND secret = $3",
                &[&before, &w, &now],
            )
            .unwrap();
        (n == 1).then_some(()).ok_or("renewed again meanwhile".into())
    });
    // Two renewals later, the member still holds its worker id.
    let rolled_back = before.clone();
    let mut seen = vec![rolled_back];
    poll(Duration::from_secs(30), Duration::from_millis(50), || {
        let now = secret(&mut h);
        if !seen.contains(&now) {
            seen.push(now);
        }
        (seen.len() >= 3).then_some(()).ok_or(format!("renewals seen: {}", seen.len() - 1))
    });
    m.assert_logged("renewed with the secret before", "the member did not renew by it");
    let mut c = m.connect_ext();
    let r = registry_stats(&mut c);
    assert_eq!(r["source"], "leased", "{r}");
    let id: i64 = c.scalar("SELECT snowflake_next()");
    assert_eq!(worker_id_of(&mut c, id), w);
}

fn grant_legacy(hub: &Cluster) {
    hub.connect()
        .batch_execute("GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_lease TO fleet")
        .unwrap();
}

/// With the registry down, the cached lease serves a restart at its own place only: the
/// original restarts and makes ids, a copy of its directory makes none and says why, and takes
/// a worker id of its own once the registry is back.
#[test]
fn with_the_registry_down_a_copy_makes_no_id_and_its_original_restarts_with_its_cached_lease() {
    let (hub, _) = registry("copy_down_hub");
    let original = running_member("copy_down_m", &hub, &[]);
    let (w, _) = worker_id(&original);
    // Stopped while the registry is down: it cannot give the lease back, and keeps it cached
    // (a stop while the registry is up gives it back, and a restart then waits for the registry).
    hub.stop("fast");
    original.stop("fast");
    let copy = original.copy("copy_down_c");
    original.start();
    copy.start();
    let mut co = original.connect_ext();
    let id: i64 = co.scalar("SELECT snowflake_next()");
    assert_eq!(worker_id_of(&mut co, id), w);
    assert_eq!(registry_stats(&mut co)["source"], "cached");
    let mut cc = copy.connect_ext();
    let ServerError { code, message, .. } = next_error(&mut cc);
    println!("the copy, with the registry down: {code}: {message}");
    assert_eq!(code, "55000");
    copy.assert_logged("was copied, moved or restarted after a reboot", "the copy said nothing");
    hub.start();
    let (wc, waited) = worker_id(&copy);
    println!("once the registry is back: worker id {wc}, {} ms later", waited.as_millis());
    assert_ne!(wc, w);
    assert_eq!(made_beside(&[&original, &copy], 200_000).1, 0);
}
