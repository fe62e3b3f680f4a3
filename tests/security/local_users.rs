//! Other users of the machine that runs the tests or the demo. Test and demo clusters trust
//! every connection; in 0.5.0 they listened on the machine's 127.0.0.1, so any local user was
//! their superuser, ran programs as the operating-system user `postgres` (`COPY ... TO
//! PROGRAM`), and from there planted links that root's harness followed (a root-owned file of
//! mode 600, linked as `TRAP`, was emptied).
//!
//! - A test server listens in the test process's own network namespace: another user, on the
//!   machine's network, cannot connect (in the namespace, the same connection is taken, so the
//!   namespace is what keeps it out).
//! - `make run`'s demo listens on a unix socket only, in a directory only its owner may enter:
//!   the `psql` line it prints works for root, and another user reaches it neither there nor on
//!   127.0.0.1.
//! - What `postgres` plants in a cluster's directory is not followed by root: a link as `TRAP`,
//!   as the clock file or its new copy, as `postgresql.conf`, or as `server.log`, and a link in
//!   place of a directory on the way.
#![cfg(not(feature = "pg_test"))]

use common::private_network::{is_private, with_host_network};
use common::*;
use std::fs;
use std::path::Path;
use std::process::Command;
use testkit as common;

/// `psql` as the operating-system user `nobody`, on the machine's own network when `host_net`.
fn psql_as_nobody(cluster: &Cluster, host: &str, host_net: bool) -> (bool, String) {
    let mut cmd = Command::new("runuser");
    cmd.args(["-u", "nobody", "--"])
        .arg(cluster.bin("psql"))
        .args(["-h", host, "-p", &cluster.port.to_string(), "-U", "postgres", "-d", "postgres"])
        .args(["-X", "-At", "-c", "SELECT current_setting('is_superuser')"])
        .env("PGCONNECT_TIMEOUT", "5");
    if host_net {
        with_host_network(&mut cmd);
    }
    let out = cmd.output().unwrap();
    let said =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

#[test]
fn another_local_user_cannot_reach_a_test_server() {
    assert!(running_as_root(), "this test acts as another user: run it as root, as make test does");
    assert!(is_private(), "the test process runs on the machine's own network");
    let cluster = Cluster::start_new("local_user", &[]);
    // In the test's namespace the server takes anyone (trust): what keeps another user out is
    // that the namespace is not theirs.
    let (inside, said) = psql_as_nobody(&cluster, "127.0.0.1", false);
    assert!(inside && said.trim() == "on", "in the namespace: {said}");
    let (outside, said) = psql_as_nobody(&cluster, "127.0.0.1", true);
    println!("another user, on the machine's network: {}", said.trim());
    assert!(!outside, "another local user connected to a test server: {said}");
    assert!(said.contains("Connection refused"), "{said}");
}

/// `scripts/run.sh` as `make run` runs it, on the machine's own network, in a directory of the
/// test's, on a free port.
fn demo(dir: &Path, port: u16, what: &str) -> String {
    let mut cmd = Command::new(root_dir().join("scripts/run.sh"));
    cmd.arg(what)
        .current_dir(root_dir())
        .env("PG_CONFIG", default_pg_config())
        .env("PGSNOWFLAKE_RUN_DIR", dir)
        .env("PGSNOWFLAKE_PORT", port.to_string());
    with_host_network(&mut cmd);
    let out = check(cmd.output().unwrap(), &format!("scripts/run.sh {what}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn another_local_user_cannot_reach_the_demo_of_make_run() {
    assert!(running_as_root(), "this test acts as another user: run it as root, as make test does");
    let dir = scratch_dir("demo");
    let port = free_port();
    let printed = demo(&dir, port, "start");
    let stop = StopDemo(&dir);
    let connect = printed
        .lines()
        .find_map(|l| l.trim().strip_prefix("connect: "))
        .unwrap_or_else(|| panic!("no connect line in:\n{printed}"))
        .to_string();
    println!("the demo says: connect: {connect}");
    let words: Vec<&str> = connect.split_whitespace().collect();
    let host = words[words.iter().position(|w| *w == "-h").unwrap() + 1];
    // The line it prints works for the user who ran it (root here), on the machine's network.
    let mut psql = Command::new(words[0]);
    psql.args(&words[1..]).args(["-X", "-At", "-c", "SELECT count(*) FROM demo"]);
    with_host_network(&mut psql);
    let out = check(psql.output().unwrap(), "the demo's psql line");
    let rows: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(rows >= 3, "{rows} rows in the demo table");
    // Another user: not on its socket, nor on 127.0.0.1 at its port.
    let as_nobody = |host: &str| {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "nobody", "--", words[0], "-h", host, "-p", &port.to_string()])
            .args(["-U", "postgres", "-X", "-At", "-c", "SELECT 1"])
            .env("PGCONNECT_TIMEOUT", "5");
        with_host_network(&mut cmd);
        let out = cmd.output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for host in [host, "127.0.0.1"] {
        let (connected, said) = as_nobody(host);
        println!("another user, at {host}: {}", said.trim());
        assert!(!connected, "another local user connected to the demo at {host}");
    }
    assert!(as_nobody(host).1.contains("Permission denied"));
    assert!(as_nobody("127.0.0.1").1.contains("Connection refused"));
    drop(stop);
}

struct StopDemo<'a>(&'a Path);

impl Drop for StopDemo<'_> {
    fn drop(&mut self) {
        let _ = demo(self.0, 0, "stop");
    }
}

/// Root's harness refuses every link `postgres` plants where it reads or writes: the file
/// behind each link, root's and mode 600, stays as it was.
#[test]
fn root_follows_no_link_that_postgres_planted_in_a_cluster_directory() {
    assert!(running_as_root(), "this test plants links as postgres: run it as root");
    let mut cluster = Cluster::init("planted_links", &[]);
    let clock = cluster.use_fake_clock();
    let secret = scratch_dir("secret_of_root").join("secret");
    fs::write(&secret, "root's own\n").unwrap();
    fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    fs::set_permissions(
        secret.parent().unwrap(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    Command::new("chown").args(["root:root"]).arg(secret.parent().unwrap()).status().unwrap();
    let plant = |link: &Path| {
        let _ =
            Command::new("runuser").args(["-u", "postgres", "--", "rm", "-rf"]).arg(link).status();
        let planted = Command::new("runuser")
            .args(["-u", "postgres", "--", "ln", "-s"])
            .arg(&secret)
            .arg(link)
            .status()
            .unwrap();
        assert!(planted.success(), "postgres could not plant {}", link.display());
    };
    // TRAP, which the harness marks a directory with after a failed assertion.
    plant(&cluster.dir.join("TRAP"));
    assert!(files::create_new(&cluster.dir.join("TRAP"), b"").is_err());
    // server.log, read and printed when a test fails.
    plant(&cluster.log_path());
    assert_eq!(cluster.log(), "", "the harness read a link as the server's log");
    // postgresql.conf, appended to.
    let conf = cluster.data().join("postgresql.conf");
    let kept = cluster.data().join("postgresql.conf.kept");
    Command::new("runuser")
        .args(["-u", "postgres", "--", "mv"])
        .arg(&conf)
        .arg(&kept)
        .status()
        .unwrap();
    plant(&conf);
    assert!(files::append(&conf, b"# appended\n").is_err());
    // The data directory itself swapped for a link to the secret's directory.
    let data = cluster.data();
    let moved = cluster.dir.join("data.moved");
    Command::new("runuser")
        .args(["-u", "postgres", "--", "mv"])
        .arg(&data)
        .arg(&moved)
        .status()
        .unwrap();
    let planted = Command::new("runuser")
        .args(["-u", "postgres", "--", "ln", "-s"])
        .arg(secret.parent().unwrap())
        .arg(&data)
        .status()
        .unwrap();
    assert!(planted.success());
    assert!(files::read(&data.join("secret")).is_err(), "read through a linked directory");
    // The clock file: replaced whole, the link itself and not what it names.
    plant(&cluster.dir.join("faketime"));
    clock.set(5.0);
    let clock_file = fs::symlink_metadata(cluster.dir.join("faketime")).unwrap();
    assert!(clock_file.is_file(), "the clock file is still a link");
    assert_eq!(fs::read_to_string(&secret).unwrap(), "root's own\n", "root's file changed");
    let mode = fs::metadata(&secret).unwrap().permissions();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);
}
