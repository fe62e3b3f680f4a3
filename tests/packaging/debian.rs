//! This project's package, installed by apt into Debian's own PostgreSQL: the server most
//! Debian users of a major run, built by Debian, not by this project. For the major that
//! `PG_CONFIG` names, in a copy of the Debian root that packages it (scripts/debian-root.sh:
//! trixie's postgresql-17, sid's postgresql-18, experimental's postgresql-19 in a root of sid;
//! 19's tests run inside a build root over that root, which stays as Debian ships it):
//! `apt-get install ./postgresql-N-pg-snowflake_*.deb`
//! resolves its dependencies against Debian's packages, then a black-box smoke run against
//! Debian's server: ids and their decoding, a restart with the clock 30 s behind (only the
//! carried mark keeps ids above), a standby that refuses ids, and its promotion with its own
//! clock 30 s behind, continuing above the old primary.
//!
//! 15 and 16 have no Debian build in trixie or sid: there the test says so and checks nothing.
#![cfg(not(feature = "pg_test"))]

use common::debian_root::*;
use common::release::{deb, version};
use common::*;
use testkit as common;

#[test]
fn package_in_debians_own_postgresql_makes_ids_across_a_restart_and_a_promotion() {
    let major = major_under_test();
    let Some(suite) = suite_of(&major) else {
        eprintln!(
            "Debian builds no PostgreSQL {major} in trixie or sid: the package is tested in Debian's own server on 17, 18 and 19"
        );
        return;
    };
    let deb = deb(&major, &version());
    assert!(deb.exists(), "{} is missing: run `make package`", deb.display());
    let root = DebianRoot::copy(suite, "debian_package");
    assert_eq!(root.major, major);
    let server = root.installed(&format!("postgresql-{major}"));
    assert!(
        !server.is_empty() && !server.contains("pgsnowflake"),
        "the {suite} root's postgresql-{major} is {server:?}, not Debian's"
    );

    // apt, not dpkg: the package's dependencies come from Debian's archive.
    let inside = root.put(&deb);
    root.run(&["apt-get", "install", "-y", "-qq", "--no-install-recommends", &inside]);
    assert!(
        root.installed(&format!("postgresql-{major}-pg-snowflake")).ends_with("-1"),
        "the package is not installed"
    );
    assert!(root.path(&format!("/usr/lib/postgresql/{major}/lib/pg_snowflake.so")).exists());

    let primary = RootCluster::init(&root, "primary", &["snowflake.max_drift = '5min'"]);
    primary.start(0.0);
    let mut c = primary.connect();
    let version: String = c.scalar("SELECT version()");
    assert!(version.contains("Debian"), "not Debian's build of PostgreSQL: {version}");
    eprintln!("Debian {suite}: {version}, package {server}");
    c.batch_execute("CREATE EXTENSION pg_snowflake").unwrap();
    let first = ids(&mut c, "SELECT snowflake_next() FROM generate_series(1, 10000)");
    assert_strictly_increasing(&first, "ids in Debian's server");
    let (worker, age): (i32, f64) = {
        let row = c
            .query_one(
                "SELECT worker_id, extract(epoch FROM clock_timestamp() - ts)::float8
                 FROM snowflake_decode($1)",
                &[first.last().unwrap()],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(worker, 1);
    assert!((0.0..5.0).contains(&age), "the id's time is {age} s old");
    drop(c);

    // An immediate stop, then a start with the clock 30 s behind: only the mark the library
    // wrote (state file, WAL) keeps the ids above.
    primary.stop("immediate");
    primary.start(-30.0);
    let mut c = primary.connect();
    let after = ids(&mut c, "SELECT snowflake_next() FROM generate_series(1, 1000)");
    assert!(
        after[0] > *first.last().unwrap(),
        "{} after the restart is not above {}",
        after[0],
        first.last().unwrap()
    );
    primary.set_clock(0.0);
    let mut before_failover = ids_through_renewals(&mut c, 2);
    before_failover.extend(after);

    // A standby of Debian's server, its clock 30 s behind: it refuses ids, and once promoted
    // continues above every id of the primary.
    let standby = primary.basebackup("standby");
    standby.start(-30.0);
    let mut s = standby.connect();
    let ServerError { code, message, .. } = expect_error(&mut s, "SELECT snowflake_next()");
    assert_eq!(
        (code.as_str(), message.as_str()),
        ("25006", "cannot generate snowflake ids on a standby server")
    );
    let last = ids(&mut c, "SELECT snowflake_next() FROM generate_series(1, 10000)");
    wait_for_replay(&mut c, &mut s);
    drop(c);
    primary.stop("immediate");
    standby.promote();
    let mut s = standby.connect();
    let promoted = ids(&mut s, "SELECT snowflake_next() FROM generate_series(1, 100)");
    let top = last.iter().chain(&before_failover).max().unwrap();
    assert!(
        promoted[0] > *top,
        "the promoted standby's {} is not above the primary's {top}",
        promoted[0]
    );
    drop(s);
    standby.stop("fast");

    // Removed by apt: none of its files is left in Debian's directories.
    root.run(&["apt-get", "remove", "-y", "-qq", &format!("postgresql-{major}-pg-snowflake")]);
    assert!(!root.path(&format!("/usr/lib/postgresql/{major}/lib/pg_snowflake.so")).exists());
    assert!(!root
        .path(&format!("/usr/share/postgresql/{major}/extension/pg_snowflake.control"))
        .exists());
}
