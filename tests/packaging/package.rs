//! The Debian package of the major that `PG_CONFIG` names, as `make package` builds it
//! (`scripts/package.sh`): its layout, lintian, an install with `apt-get install ./<file>.deb`
//! into the server of that major (laid out as Debian's: Debian's own 15, and the local
//! postgresql-N packages of scripts/build-postgres.sh), ids across a restart, an upgrade of the
//! package from 0.2.0 with `ALTER EXTENSION ... UPDATE` (on 15), and a removal that leaves none
//! of its files.
//!
//! It installs and removes system packages, so it runs alone, last in `make test-major`, which
//! installs the development build again afterwards (`make test-package`).
#![cfg(not(feature = "pg_test"))]

use common::release::{deb, package_of_release, version, RELEASE_0_2_0};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use testkit as common;

/// The scripts of earlier releases kept in sql/ (`pg_snowflake--0.3.0.sql`,
/// `pg_snowflake--0.2.0--0.3.0.sql`, ...), which the package ships as they are.
fn release_scripts() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root_dir().join("sql"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pg_snowflake--") && n.ends_with(".sql"))
        .collect();
    names.sort();
    assert!(names.len() >= 5, "sql/ lost the scripts of earlier releases: {names:?}");
    names
}

/// The newest earlier release: the highest version with an install script in sql/.
fn last_release() -> String {
    release_scripts()
        .iter()
        .filter_map(|n| n.strip_prefix("pg_snowflake--")?.strip_suffix(".sql"))
        .filter(|v| !v.contains("--"))
        .map(|v| {
            let parts: Vec<u32> = v.split('.').map(|p| p.parse().unwrap()).collect();
            (parts, v.to_string())
        })
        .max()
        .unwrap()
        .1
}

fn package_name() -> String {
    format!("postgresql-{}-pg-snowflake", major_under_test())
}

fn run(program: &str, args: &[&str]) -> String {
    let out = check(
        Command::new(program).args(args).env("DEBIAN_FRONTEND", "noninteractive").output().unwrap(),
        &format!("{program} {}", args.join(" ")),
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn apt_install(deb: &Path) {
    run("apt-get", &["install", "-y", "-qq", "--allow-downgrades", deb.to_str().unwrap()]);
}

/// The files (not directories) the installed package owns.
fn owned_files() -> Vec<PathBuf> {
    run("dpkg", &["-L", &package_name()])
        .lines()
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .collect()
}

/// A server of this major that preloads the installed library.
fn server(name: &str) -> Cluster {
    Cluster::start_new(name, &[])
}

fn remove_and_check_nothing_is_left() {
    let files = owned_files();
    assert!(!files.is_empty());
    run("apt-get", &["remove", "-y", "-qq", &package_name()]);
    let left: Vec<&PathBuf> = files.iter().filter(|f| f.exists()).collect();
    assert!(left.is_empty(), "removing the package left {left:?}");
}

#[test]
fn package_installs_into_its_server_works_and_leaves_nothing_when_removed() {
    let major = major_under_test();
    let deb = deb(&major, &version());
    assert!(deb.exists(), "{} is missing: run `make package`", deb.display());
    // Laid out as Debian's and PGDG's extension packages, with every script `ALTER EXTENSION
    // ... UPDATE` needs from any earlier release: the scripts of earlier releases kept in sql/,
    // this release's, and the upgrade from the last earlier release to this one.
    let listing = run("dpkg-deb", &["-c", deb.to_str().unwrap()]);
    let extension = format!("./usr/share/postgresql/{major}/extension");
    let mut expected = vec![
        format!("./usr/lib/postgresql/{major}/lib/pg_snowflake.so"),
        format!("{extension}/pg_snowflake.control"),
        format!("{extension}/pg_snowflake--{}.sql", version()),
        format!("{extension}/pg_snowflake--{}--{}.sql", last_release(), version()),
        format!("./usr/share/doc/{}/copyright", package_name()),
        format!("./usr/share/doc/{}/changelog.Debian.gz", package_name()),
    ];
    expected.extend(release_scripts().iter().map(|f| format!("{extension}/{f}")));
    for path in expected {
        assert!(listing.contains(&path), "the package lacks {path}:\n{listing}");
    }
    for line in listing.lines() {
        let path = line.split_whitespace().last().unwrap();
        assert!(
            path == "./"
                || ["./usr/", "./usr/lib/", "./usr/share/", "./usr/share/doc/"].contains(&path)
                || path.starts_with(&format!("./usr/lib/postgresql/{major}/"))
                || path == "./usr/lib/postgresql/"
                || path.starts_with(&format!("./usr/share/postgresql/{major}/"))
                || path == "./usr/share/postgresql/"
                || path.starts_with(&format!("./usr/share/doc/{}/", package_name())),
            "a file outside Debian's places: {path}"
        );
    }
    let control = run("dpkg-deb", &["-f", deb.to_str().unwrap(), "Depends"]);
    assert!(control.starts_with(&format!("postgresql-{major}, libc6 (>= ")), "Depends: {control}");
    // lintian: no error (the warnings it may give are printed, for the note).
    let lintian = Command::new("lintian")
        .args(["--fail-on", "error", "--no-tag-display-limit"])
        .arg(&deb)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&lintian.stdout).into_owned();
    eprintln!("lintian {}:\n{report}", deb.display());
    assert!(lintian.status.success(), "lintian reports errors:\n{report}");
    assert!(!report.contains("E: "), "lintian reports errors:\n{report}");

    apt_install(&deb);
    let status = run("dpkg-query", &["-W", "-f=${Status} ${Version}", &package_name()]);
    assert_eq!(status, format!("install ok installed {}-1", version()));
    let cluster = server("package");
    let mut c = cluster.connect_ext();
    let before = ids(&mut c, "SELECT snowflake_next() FROM generate_series(1, 1000)");
    assert_strictly_increasing(&before, "ids from the package's library");
    cluster.restart("fast");
    let after = ids(&mut cluster.connect(), "SELECT snowflake_next() FROM generate_series(1, 10)");
    assert!(after[0] > *before.last().unwrap());
    cluster.stop("fast");
    remove_and_check_nothing_is_left();
}

/// The package of 0.2.0, built from that release's commit, is installed and used; then the
/// package of this release replaces it, the server restarts, `ALTER EXTENSION ... UPDATE`
/// moves the database to this release, and the rows, the default and the ids' order survive.
/// On PostgreSQL 15: the package upgrade is the same on every major, and building the old
/// release costs minutes.
#[test]
fn package_of_0_2_0_upgrades_in_place_and_the_extension_updates() {
    if major_under_test() != "15" {
        eprintln!("the package upgrade from 0.2.0 is tested on PostgreSQL 15");
        return;
    }
    let old_deb = package_of_release("0.2.0", RELEASE_0_2_0);
    apt_install(&old_deb);
    let cluster = server("package_upgrade");
    let mut c = cluster.connect_ext();
    let version_of = |c: &mut Client| -> String {
        c.scalar("SELECT extversion FROM pg_extension WHERE extname = 'pg_snowflake'")
    };
    assert_eq!(version_of(&mut c), "0.2.0");
    c.batch_execute(
        "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), item text);
         INSERT INTO orders (item) SELECT 'before ' || g FROM generate_series(1, 1000) g",
    )
    .unwrap();
    let old_max: i64 = c.scalar("SELECT max(id) FROM orders");
    drop(c);
    // The new package over the old one, under the running server; then a restart loads it.
    apt_install(&deb(&major_under_test(), &version()));
    cluster.restart("fast");
    let mut c = cluster.connect();
    c.batch_execute("ALTER EXTENSION pg_snowflake UPDATE").unwrap();
    assert_eq!(version_of(&mut c), version());
    let new = ids(&mut c, "INSERT INTO orders (item) VALUES ('after') RETURNING id");
    assert!(new[0] > old_max, "{} is not above {old_max}", new[0]);
    let rows: i64 = c.scalar("SELECT count(*) FROM orders");
    assert_eq!(rows, 1001);
    cluster.stop("fast");
    remove_and_check_nothing_is_left();
}
