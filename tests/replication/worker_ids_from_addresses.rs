//! Worker ids from the servers' own addresses (`snowflake.worker_id_network`, src/coordination/address.rs),
//! as pods take them from their pod network: each server runs in a network namespace this test
//! makes, with an address of its own on that namespace's loopback device, and nothing leaves it.
//! - four namespaces, four worker ids (the addresses' offsets in the network), their ids merged
//!   into one table with none twice;
//! - two servers in one namespace (one address): the second makes no id, and says why;
//! - no address in the network, several, and a network larger than the layout: refused, each
//!   with the reason;
//! - a copy of a data directory started in another namespace takes that namespace's worker id;
//! - a server that gets an address another server had starts above every id that one made,
//!   although it made them ahead of its clock.
//!
//! Majors: 18. Which worker id an address gives, and the hold in the namespace, are the same
//! code on every major (core/src/network.rs, src/coordination/address.rs), read once at start.
#![cfg(not(feature = "pg_test"))]

use common::network_namespace::Namespace;
use common::*;
use std::time::Duration;
use testkit as common;

const NETWORK: &str = "snowflake.worker_id_network = '10.77.0.0/22'";

/// The worker id of `cluster`'s first id, once it makes one.
fn worker_id(cluster: &Cluster) -> (i32, i64) {
    let mut c = cluster.connect_ext();
    let id = first_id(&mut c, Duration::from_secs(30));
    (worker_id_of(&mut c, id), id)
}

#[test]
fn four_namespaces_take_the_worker_ids_of_their_addresses_and_make_no_id_twice() {
    let spaces: Vec<Namespace> = (1..=4)
        .map(|i| Namespace::new(&format!("sf-four{i}"), &[&format!("10.77.1.{i}")]))
        .collect();
    let servers: Vec<Cluster> = spaces
        .iter()
        .enumerate()
        .map(|(i, ns)| {
            let c = Cluster::init_in(
                ns,
                &format!("addr_four{i}"),
                &[NETWORK, "snowflake.worker_id = -1"],
            );
            c.start();
            c
        })
        .collect();
    let ids: Vec<i32> = servers.iter().map(|s| worker_id(s).0).collect();
    println!("worker ids of 10.77.1.1 to 10.77.1.4 in 10.77.0.0/22: {ids:?}");
    assert_eq!(ids, vec![257, 258, 259, 260]);
    let mut c = servers[0].connect_ext();
    let s = stats(&mut c);
    assert_eq!(s["worker_id_from"], "address", "{s}");
    assert_eq!(s["address"]["address"], "10.77.1.1", "{s}");
    assert_eq!(s["address"]["network"], "10.77.0.0/22", "{s}");
    // Their ids, merged into one table.
    let mut clients: Vec<Client> = servers.iter().map(|s| s.connect_ext()).collect();
    let made = ids_at_once(&mut clients, "SELECT snowflake_next() FROM generate_series(1, 50000)");
    let mut t = servers[0].connect_ext();
    t.batch_execute("CREATE TABLE merged (id bigint PRIMARY KEY)").unwrap();
    let all: Vec<i64> = made.into_iter().flatten().collect();
    for chunk in all.chunks(10_000) {
        t.execute("INSERT INTO merged SELECT unnest($1::int8[])", &[&chunk]).unwrap();
    }
    let rows: i64 = t.scalar("SELECT count(*) FROM merged");
    println!("{rows} ids of four servers merged into one table under its primary key");
    assert_eq!(rows, 200_000);
}

#[test]
fn two_servers_in_one_namespace_never_both_make_ids() {
    let ns = Namespace::new("sf-two", &["10.77.2.1"]);
    let first = Cluster::init_in(&ns, "addr_two_a", &[NETWORK, "snowflake.worker_id = -1"]);
    first.start();
    let second = Cluster::init_in(&ns, "addr_two_b", &[NETWORK, "snowflake.worker_id = -1"]);
    second.start();
    assert_eq!(worker_id(&first).0, 513);
    let e = next_error(&mut second.connect_ext());
    println!("the second server of one namespace: {}: {}", e.code, e.message);
    assert_eq!(e.code, "55000");
    assert!(
        e.detail
            .to_lowercase()
            .contains("another server of this network namespace holds address 10.77.2.1"),
        "{e:?}"
    );
    second.assert_logged("another server of this network namespace", "the second said nothing");
    // Once the first stops, the second is restarted and takes the worker id.
    first.stop("fast");
    second.restart("fast");
    assert_eq!(worker_id(&second).0, 513);
}

#[test]
fn no_address_several_addresses_and_a_network_too_large_are_refused_with_the_reason() {
    let ns = Namespace::new("sf-refused", &["10.77.3.1", "10.77.3.2"]);
    for (network, why) in [
        ("10.99.0.0/24", "no address of this server is in network 10.99.0.0/24"),
        ("10.77.3.0/24", "this server has 2 addresses in network 10.77.3.0/24"),
        ("10.77.0.0/16", "holds 65536 addresses, more than the layout's 1024 worker ids"),
        ("10.77.3.0", "is not a network"),
    ] {
        let c = Cluster::init_in(
            &ns,
            "addr_refused",
            &[&format!("snowflake.worker_id_network = '{network}'"), "snowflake.worker_id = -1"],
        );
        c.start();
        let e = next_error(&mut c.connect_ext());
        println!("{network}: {}: {}", e.code, e.detail);
        assert_eq!(e.code, "55000");
        assert!(e.detail.to_lowercase().contains(&why.to_lowercase()), "{network}: {e:?}");
        assert!(e.hint.starts_with("Correct snowflake.worker_id_network, or give"), "{e:?}");
        c.stop("fast");
    }
    // Beside a worker id set by hand: refused, whichever is right.
    let c = Cluster::init_in(&ns, "addr_beside", &["snowflake.worker_id_network = '10.77.3.1/32'"]);
    c.start();
    let e = next_error(&mut c.connect_ext());
    assert!(e.detail.contains("worker_id_network and snowflake.worker_id both"), "{e:?}");
}

#[test]
fn a_copy_started_in_another_namespace_takes_the_worker_id_of_its_address() {
    let a = Namespace::new("sf-copy-a", &["10.77.0.10"]);
    let b = Namespace::new("sf-copy-b", &["10.77.0.11"]);
    let original = Cluster::init_in(&a, "addr_copy_m", &[NETWORK, "snowflake.worker_id = -1"]);
    original.start();
    assert_eq!(worker_id(&original).0, 10);
    original.stop("fast");
    let copy = original.copy_in(&b, "addr_copy_c");
    original.start();
    copy.start();
    let (wo, _) = worker_id(&original);
    let (wc, _) = worker_id(&copy);
    println!("the original on worker id {wo}, its copy in another namespace on {wc}");
    assert_eq!((wo, wc), (10, 11));
}

#[test]
fn a_server_that_gets_an_address_another_had_starts_above_every_id_that_one_made() {
    let ns = Namespace::new("sf-reuse", &["10.77.0.20"]);
    let before = Cluster::init_in(&ns, "addr_reuse_a", &[NETWORK, "snowflake.worker_id = -1"]);
    before.start();
    worker_id(&before);
    let mut c = before.connect_ext();
    // Ids 9 s ahead of the clock (within snowflake.max_drift), then the server is gone.
    let ahead: i64 = c.scalar("SELECT snowflake_compose(now() + interval '9 s', 0, 0)");
    c.execute("SELECT snowflake_advance_past($1)", &[&ahead]).unwrap();
    let last: i64 = c.scalar("SELECT max(snowflake_next()) FROM generate_series(1, 1000)");
    drop(c);
    before.crash();
    // Another server (another data directory) gets the address.
    let after = Cluster::init_in(&ns, "addr_reuse_b", &[NETWORK, "snowflake.worker_id = -1"]);
    after.start();
    let started = std::time::Instant::now();
    // Its first call makes an id at once: the start waited out the margin of the clocks.
    let mut c = after.connect_ext();
    let first: i64 = c.scalar("SELECT snowflake_next()");
    let w = worker_id_of(&mut c, first);
    println!(
        "the next server of 10.77.0.20: worker id {w}, its first id {} ms after its start",
        started.elapsed().as_millis()
    );
    assert_eq!(w, 20);
    assert!(
        first > last,
        "its first id {first} is not above the last of the address's previous server {last}"
    );
}

/// An address that stops being the server's while it runs (here removed from its namespace)
/// may become another server's, which derives the same worker id: ids stop at the next renewal
/// of the lease, and say why.
#[test]
fn a_server_whose_address_is_gone_makes_no_more_ids() {
    let ns = Namespace::new("sf-gone", &["10.77.0.30"]);
    let c = Cluster::init_in(&ns, "addr_gone", &[NETWORK, "snowflake.worker_id = -1"]);
    c.start();
    assert_eq!(worker_id(&c).0, 30);
    let out = std::process::Command::new("ip")
        .args(["-n", &ns.name, "addr", "del", "10.77.0.30/32", "dev", "lo"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut s = c.connect_ext();
    let sql = "SELECT snowflake_next() FROM generate_series(1, 1000) LIMIT 1";
    let said = wait_for_error(&mut s, sql, Duration::from_millis(10), "ids still made", |_| true);
    println!("once its address was gone: {}: {}", said.code, said.message);
    assert_eq!(said.code, "55000");
    assert!(said.detail.contains("10.77.0.30 of network 10.77.0.0/22"), "{said:?}");
}

/// Any layout whose worker ids cover the network: Sonyflake's 16 worker bits take a /16 (its
/// own default, the low 16 bits of the address), and the claims worker claims the worker id the
/// address gave.
#[test]
fn sonyflakes_layout_takes_a_16_bit_network_and_claims_the_worker_id() {
    let ns = Namespace::new("sf-sony", &["10.78.5.6"]);
    let c = Cluster::init_in(
        &ns,
        "addr_sony",
        &[
            "snowflake.layout = 'sonyflake'",
            "snowflake.worker_id_network = '10.78.0.0/16'",
            "snowflake.worker_id = -1",
            "snowflake.claims_database = 'postgres'",
            "snowflake.claims_interval = 1",
        ],
    );
    c.start();
    assert_eq!(worker_id(&c).0, 5 * 256 + 6);
    let mut s = c.connect_ext();
    poll(Duration::from_secs(30), Duration::from_millis(100), || {
        let claimed: Vec<i32> = s.column("SELECT worker_id FROM snowflake.snowflake_claims");
        (claimed == [1286]).then_some(()).ok_or(format!("claims: {claimed:?}"))
    });
}
