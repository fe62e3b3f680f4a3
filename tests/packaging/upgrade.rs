//! pg_upgrade from one major to the next (17 to 18 in `make test`, and 18 to 19 in the root of
//! 19, from Debian's 18 there): the new cluster continues
//! above every id of the old one with its clock set 30 s back, because the old server passes its
//! mark on during the upgrade; and a new cluster whose old server did not pass a mark on refuses
//! to generate ids until an operator settles it.
//!
//! The old server is the one `PG_UPGRADE_FROM_CONFIG` names, the new one `PG_CONFIG`'s; both need
//! the extension installed (`make test` does it). Without `PG_UPGRADE_FROM_CONFIG` the tests fail:
//! the Makefile runs them only when it can set it.
#![cfg(not(feature = "pg_test"))]

use common::*;
use std::path::Path;
use testkit as common;

fn old_pg_config() -> String {
    std::env::var("PG_UPGRADE_FROM_CONFIG").expect(
        "PG_UPGRADE_FROM_CONFIG must name the pg_config of the major to upgrade from \
         (make test sets it when it tests 17 and 18, and in the root of 19)",
    )
}

/// initdb arguments of the old cluster: 18's initdb enables data checksums by default, and the
/// new cluster has none (below); pg_upgrade needs both alike. 17's initdb has no
/// `--no-data-checksums` and enables none.
fn old_initdb() -> &'static [&'static str] {
    let out = std::process::Command::new(old_pg_config())
        .arg("--version")
        .output()
        .expect("the old pg_config runs");
    let version = String::from_utf8_lossy(&out.stdout).into_owned();
    let major: u32 = version
        .trim()
        .trim_start_matches("PostgreSQL ")
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("the old pg_config says {version:?}"));
    if major >= 18 {
        &["--no-data-checksums"]
    } else {
        &[]
    }
}

/// The new cluster: PostgreSQL 18's and 19's initdb enable data checksums by default, and
/// pg_upgrade needs both clusters alike.
fn new_cluster(name: &str) -> Cluster {
    Cluster::init_with(
        name,
        &default_pg_config(),
        &["--no-data-checksums"],
        &["snowflake.max_drift = '5min'"],
    )
}

fn pg_upgrade(old: &Cluster, new: &Cluster) -> String {
    let out = new
        .server_cmd("pg_upgrade", &new.dir)
        .arg("--retain")
        .arg("-b")
        .arg(old.bindir())
        .arg("-B")
        .arg(new.bindir())
        .arg("-d")
        .arg(old.data())
        .arg("-D")
        .arg(new.data())
        .args(["-p", &old.port.to_string(), "-P", &new.port.to_string()])
        .output()
        .unwrap();
    let out = check(out, "pg_upgrade");
    // --retain keeps pg_upgrade's logs; the servers' logs say what pg_snowflake did.
    let mut logs = String::new();
    for entry in walk(&new.data().join("pg_upgrade_output.d")) {
        if entry.ends_with("pg_upgrade_server.log") {
            logs.push_str(&files::read_to_string(&entry).unwrap());
        }
    }
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Upgrade Complete"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    logs
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn pg_upgrade_carries_the_mark_and_ids_continue_above_with_the_clock_set_back() {
    let old = Cluster::init_with("upgrade_old", &old_pg_config(), old_initdb(), &[]);
    old.start();
    let mut c = old.connect_ext();
    c.batch_execute(
        "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), v int);
         INSERT INTO t (v) SELECT g FROM generate_series(1, 20000) g",
    )
    .unwrap();
    let old_max: i64 = c.scalar("SELECT max(id) FROM t");
    drop(c);
    old.stop("fast");

    let mut new = new_cluster("upgrade_new");
    let logs = pg_upgrade(&old, &new);
    assert!(
        logs.contains("pg_snowflake: carried the mark"),
        "the old server did not pass its mark on:\n{logs}"
    );

    // The upgraded cluster starts with its clock 30 s behind the old cluster's ids.
    let clock = new.use_fake_clock();
    clock.set(-30.0);
    new.start();
    let mut c = new.connect();
    let carried: i64 = c.scalar("SELECT max(id) FROM t");
    assert_eq!(carried, old_max, "the rows did not come along");
    let new_ids =
        ids(&mut c, "INSERT INTO t (v) SELECT g FROM generate_series(1, 1000) g RETURNING id");
    assert!(
        new_ids[0] > old_max,
        "first id after pg_upgrade {} is not above the old cluster's {old_max}",
        new_ids[0]
    );
    assert_strictly_increasing(&new_ids, "after pg_upgrade");
    let behind = "the new cluster's clock was not behind the old ids";
    new.assert_logged("ms behind the ids handed out before the restart", behind);
}

#[test]
fn pg_upgrade_from_a_server_that_did_not_pass_a_mark_on_refuses_until_settled() {
    // The old server does not load pg_snowflake (it only decoded ids), so nothing passes the
    // mark on: the new cluster cannot know where old ids ended and says so.
    let old = Cluster::init_with(
        "upgrade_old_bare",
        &old_pg_config(),
        old_initdb(),
        &["shared_preload_libraries = ''"],
    );
    old.start();
    old.connect_ext();
    old.stop("fast");

    let new = new_cluster("upgrade_new_bare");
    let logs = pg_upgrade(&old, &new);
    assert!(logs.contains("no mark arrived from the old cluster"), "{logs}");
    new.start();
    // Settled as the hint says: this old cluster never generated an id.
    refused_until_the_state_file_is_deleted(&new, &mut new.connect(), "pg_snowflake.state");
}
