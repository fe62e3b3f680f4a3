//! The signed apt repository of `make repo` (scripts/repo.sh), used as a Debian user would use
//! it, in a copy of the Debian 13 root with Debian's own PostgreSQL 17 (see tests/packaging/debian.rs),
//! when 17 is the major under test, and of the sid root with Debian's 19 when 19 is:
//! - the repository is an apt source with `signed-by` its own key, served over HTTP;
//! - `apt-get install postgresql-N-pg-snowflake`, by name, installs the previous release
//!   (0.3.0) while the repository holds only that, and a server uses it (on 19, which no
//!   earlier release has a package for, this release);
//! - on 17, the repository then publishes this release: `apt-get update` and
//!   `apt-get install --only-upgrade` move the package to it, and after a restart `ALTER EXTENSION ... UPDATE` moves the
//!   database, whose ids continue above the old ones;
//! - a repository signed by another key is refused by apt-get update;
//! - `apt-get remove` leaves none of the package's files.
#![cfg(not(feature = "pg_test"))]

use common::debian_root::*;
use common::http::Served;
use common::release::{deb, package_of_0_3_0, version};
use common::*;
use std::fs;
use std::path::Path;
use std::process::Command;
use testkit as common;

/// `apt-get update` of the repository's source alone, as `apt-get update -o Dir::Etc::...` updates
/// one source: the root's Debian sources are not what is tested, and a CI run failed when
/// deb.debian.org did not resolve for a minute (the lists the root was made with stay).
const UPDATE: &[&str] = &[
    "apt-get",
    "update",
    "-qq",
    "-o",
    "Dir::Etc::sourcelist=sources.list.d/pg_snowflake.list",
    "-o",
    "Dir::Etc::sourceparts=-",
    "-o",
    "APT::Get::List-Cleanup=0",
];

/// scripts/repo.sh OUT DEBS, signing with the key in `key_home` (made there the first time).
fn publish(out: &Path, key_home: &Path, debs: &[&Path]) {
    check(
        Command::new(root_dir().join("scripts/repo.sh"))
            .arg(out)
            .args(debs)
            .env("PG_SNOWFLAKE_REPO_GNUPGHOME", key_home)
            .output()
            .unwrap(),
        "scripts/repo.sh",
    );
}

#[test]
fn package_repository_installs_by_name_upgrades_with_apt_and_removes() {
    // On Debian 13, the stable release, with its 17: the repository and apt behave alike for
    // every major, and the package of 0.3.0 costs minutes to build for each. On 19 too, whose
    // package is built in another root than the others (sid's, with another libc): this
    // release's package alone, as 0.3.0 has none for 19.
    let major = major_under_test();
    if major != "17" && major != "19" {
        eprintln!("the apt repository is tested on PostgreSQL 17, Debian 13's own, and 19, sid's");
        return;
    }
    let suite = suite_of(&major).unwrap();
    let new = deb(&major, &version());
    assert!(new.exists(), "{} is missing: run `make package`", new.display());
    let (old, old_version) = if major == "17" {
        (package_of_0_3_0(), "0.3.0".to_string())
    } else {
        (new.clone(), version())
    };
    // Every release published so far (on 19 one package: scripts/repo.sh copies each file once).
    let mut all: Vec<&Path> = vec![&old];
    if old != new {
        all.push(&new);
    }
    let root = DebianRoot::copy(suite, "repo");
    let package = format!("postgresql-{major}-pg-snowflake");

    // The repository while 0.3.0 (on 19: this release) is the latest release, with a key of
    // its own.
    let repo = root.scratch.join("repo");
    let key = root.scratch.join("key");
    publish(&repo, &key, &[&old]);
    let served = Served::start(&repo, &root.scratch.join("requests.log"));

    // As a user adds it: the key where signed-by names it, and the source.
    fs::create_dir_all(root.path("/etc/apt/keyrings")).unwrap();
    fs::copy(repo.join("pg_snowflake.asc"), root.path("/etc/apt/keyrings/pg_snowflake.asc"))
        .unwrap();
    fs::write(
        root.path("/etc/apt/sources.list.d/pg_snowflake.list"),
        format!(
            "deb [signed-by=/etc/apt/keyrings/pg_snowflake.asc] {}/ pg-snowflake main\n",
            served.url
        ),
    )
    .unwrap();
    root.run(UPDATE);
    // The tool took effect: apt read the signed index from this server.
    let requests = files::read_to_string(&root.scratch.join("requests.log")).unwrap();
    assert!(requests.contains("GET /dists/pg-snowflake/InRelease HTTP/1.1\" 200"), "{requests}");
    root.run(&["apt-get", "install", "-y", "-qq", "--no-install-recommends", &package]);
    assert_eq!(root.installed(&package), format!("{old_version}-1"));

    let server = RootCluster::init(&root, "repo", &[]);
    server.start(0.0);
    let mut c = server.connect();
    c.batch_execute(
        "CREATE EXTENSION pg_snowflake;
         CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), item text);
         INSERT INTO orders (item) SELECT 'before ' || g FROM generate_series(1, 1000) g",
    )
    .unwrap();
    let extversion = |c: &mut Client| -> String {
        c.scalar("SELECT extversion FROM pg_extension WHERE extname = 'pg_snowflake'")
    };
    assert_eq!(extversion(&mut c), old_version);
    let old_max: i64 = c.scalar("SELECT max(id) FROM orders");
    drop(c);

    // A repository signed by another key than the one signed-by names: refused, nothing changes.
    publish(&repo, &root.scratch.join("other-key"), &all);
    let refused = root.try_run(UPDATE);
    let said = String::from_utf8_lossy(&refused.stderr).into_owned()
        + &String::from_utf8_lossy(&refused.stdout);
    // apt keeps the index it had and warns (sqv on trixie says the key is missing, gpgv on
    // older releases NO_PUBKEY); the upgrade below then finds nothing new. Only this package is
    // upgraded: `apt-get upgrade` would also fetch Debian's security updates of the root.
    assert!(
        said.contains("Signature verification failed")
            || said.contains("signature verification failed")
            || said.contains("NO_PUBKEY"),
        "apt-get update took a repository signed by another key:\n{said}"
    );
    let upgrade = root.run(&["apt-get", "install", "--only-upgrade", "-y", &package]);
    assert_eq!(root.installed(&package), format!("{old_version}-1"), "{upgrade}");

    // This release published with the repository's key: the upgrade takes it (on 19 there
    // is nothing newer: the package stays, and the server goes on above its ids after a restart).
    publish(&repo, &key, &all);
    root.run(UPDATE);
    let upgrade = root.run(&["apt-get", "install", "--only-upgrade", "-y", &package]);
    assert_eq!(root.installed(&package), format!("{}-1", version()), "{upgrade}");
    server.stop("fast");
    server.start(0.0);
    let mut c = server.connect();
    if old_version != version() {
        c.batch_execute("ALTER EXTENSION pg_snowflake UPDATE").unwrap();
    }
    assert_eq!(extversion(&mut c), version());
    let id: i64 = c.scalar("INSERT INTO orders (item) VALUES ('after') RETURNING id");
    assert!(id > old_max, "{id} is not above {old_max}");
    drop(c);
    server.stop("fast");

    let files: Vec<String> = root
        .run(&["dpkg", "-L", &package])
        .lines()
        .filter(|f| root.path(f).is_file())
        .map(str::to_string)
        .collect();
    assert!(files.iter().any(|f| f.ends_with("/pg_snowflake.so")), "{files:?}");
    root.run(&["apt-get", "remove", "-y", "-qq", &package]);
    let left: Vec<&String> = files.iter().filter(|f| root.path(f).exists()).collect();
    assert!(left.is_empty(), "apt-get remove left {left:?}");
}
