//! The scripts that set a machine up for `make run` and `make test`, run for real.
//!
//! How `scripts/build-postgres.sh` picks the release it builds from its list
//! (`scripts/postgres-versions`), against a mirror of Debian's pool served here over HTTP
//! (`python3 -m http.server`), so that what the archive answers is chosen by the test:
//! - a release the archive no longer has (404) falls back to the next listed one, and says so;
//! - a download whose sha256 differs from the list stops everything, and no older release is
//!   tried: a corrupt or swapped file must not be built, nor hidden by a fallback;
//! - when no listed release can be had, the script stops naming every address it tried;
//! - an archive that does not answer (a refused connection) is named with curl's reason.
//!
//! None of these gets as far as building: the script exits before it unpacks anything, and the
//! installed PostgreSQL is left as it was (checked).
//!
//! How `scripts/own-dir.sh` refuses a directory that another user made (in /tmp, where root
//! runs the clusters of `make test-pgrx` and `make run`), or a symlink, and takes a new one.
//!
//! That suites which `scripts/test-suites.py` runs side by side take their ports from blocks of
//! their own.
//!
//! How `scripts/test-suites.py` checks a suite's `//! Majors:` line.
//!
//! That a test run removes the directories that ended runs left behind, but not a running
//! server's.
//!
//! That `scripts/build-citus.sh` checks the vendored Citus archive's sha256 before it unpacks
//! anything, against a stand-in PostgreSQL whose directories stay empty.
//!
//! That every target of the Makefile refuses to start while `PG_SNOWFLAKE_MUTANT` is set.
//!
//! Majors: 17. The scripts run on this host, the same for every major: once is enough.
#![cfg(not(feature = "pg_test"))]

use common::http::Served;
use common::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use testkit as common;

/// Debian's pool laid out under a directory, served on a port of its own.
struct Mirror {
    dir: PathBuf,
    url: String,
    _served: Served,
}

impl Mirror {
    fn start(name: &str) -> Mirror {
        let dir = scratch_dir(name);
        fs::create_dir_all(dir.join("pool/main/p/postgresql-17")).unwrap();
        let served = Served::start(&dir, &dir.join("requests.log"));
        Mirror { dir, url: served.url.clone(), _served: served }
    }

    /// Puts `bytes` in the pool as the upstream tarball of `version`; returns its sha256.
    fn serve(&self, version: &str, bytes: &[u8]) -> String {
        let file = self
            .dir
            .join(format!("pool/main/p/postgresql-17/postgresql-17_{version}.orig.tar.bz2"));
        fs::write(&file, bytes).unwrap();
        let out = Command::new("sha256sum").arg(&file).output().unwrap();
        String::from_utf8(out.stdout).unwrap()[..64].to_string()
    }

    /// The requests the mirror answered, as http.server logs them ("GET /pool/... 404").
    fn requests(&self) -> String {
        files::read_to_string(&self.dir.join("requests.log")).unwrap()
    }
}

/// What `scripts/build-postgres.sh 17` did with this list and this archive.
struct Run {
    code: Option<i32>,
    out: String,
    err: String,
}

fn build_17(dir: &Path, mirror_url: &str, versions: &str) -> Run {
    let list = dir.join("postgres-versions");
    fs::write(&list, versions).unwrap();
    let installed_before = installed_17();
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-postgres.sh"))
        .arg("17")
        .env("PG_SNOWFLAKE_VERSIONS", &list)
        .env("PG_SNOWFLAKE_DEBIAN_MIRROR", mirror_url)
        .output()
        .unwrap();
    assert_eq!(
        installed_17(),
        installed_before,
        "the installed postgresql-17 must be left as it was"
    );
    Run {
        code: out.status.code(),
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn installed_17() -> String {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Status} ${Version}", "postgresql-17"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const NO_SUCH_SHA: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[test]
fn a_release_gone_from_the_archive_falls_back_but_a_wrong_checksum_stops_everything() {
    let mirror = Mirror::start("mirror-checksum");
    let bad = mirror.serve("17.97", b"not the release that was listed");
    let good = mirror.serve("17.96", b"a file whose checksum is listed");
    assert_ne!(bad, NO_SUCH_SHA);
    let run = build_17(
        &mirror.dir,
        &mirror.url,
        &format!(
            "17 17.98 {NO_SUCH_SHA} debian\n17 17.97 {NO_SUCH_SHA} debian\n17 17.96 {good} debian\n"
        ),
    );
    let all = format!("{}\n{}", run.out, run.err);
    assert_eq!(run.code, Some(1), "{all}");
    // The tool took effect: the script asked this mirror, and got its 404.
    let requests = mirror.requests();
    assert!(
        requests.contains(
            "GET /pool/main/p/postgresql-17/postgresql-17_17.98.orig.tar.bz2 HTTP/1.1\" 404"
        ),
        "{requests}"
    );
    // 17.98 is gone: said, and the next one tried.
    assert!(
        run.out.contains(&format!(
            "PostgreSQL 17.98 cannot be had ({}/pool/main/p/postgresql-17/postgresql-17_17.98.orig.tar.bz2: HTTP 404); trying the next listed release",
            mirror.url
        )),
        "{all}"
    );
    // 17.97 arrived with another checksum: a stop, with both checksums, and 17.96 never asked.
    assert!(
        run.err
            .contains("the download of PostgreSQL 17.97 has the wrong sha256; nothing was built"),
        "{all}"
    );
    assert!(run.err.contains(&format!("sha256:   {bad}")), "{all}");
    assert!(run.err.contains(&format!("expected: {NO_SUCH_SHA}")), "{all}");
    assert!(!all.contains("17.96"), "no fallback past a wrong checksum: {all}");
    assert!(!requests.contains("17.96"), "{requests}");
}

#[test]
fn when_no_listed_release_can_be_had_every_address_tried_is_named() {
    let mirror = Mirror::start("mirror-gone");
    let run = build_17(
        &mirror.dir,
        &mirror.url,
        &format!("17 17.99 {NO_SUCH_SHA} debian\n17 17.98 {NO_SUCH_SHA} debian\n"),
    );
    let all = format!("{}\n{}", run.out, run.err);
    assert_eq!(run.code, Some(1), "{all}");
    assert!(run.err.contains("none of the listed PostgreSQL 17 releases could be had"), "{all}");
    for version in ["17.99", "17.98"] {
        assert!(
            run.err.contains(&format!(
                "  {}/pool/main/p/postgresql-17/postgresql-17_{version}.orig.tar.bz2: HTTP 404",
                mirror.url
            )),
            "{all}"
        );
    }
    assert!(run.err.contains("Add a release that can be downloaded"), "{all}");

    // An archive that does not answer at all: curl's own reason.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let run = build_17(&mirror.dir, &closed, &format!("17 17.99 {NO_SUCH_SHA} debian\n"));
    assert_eq!(run.code, Some(1), "{}\n{}", run.out, run.err);
    assert!(
        run.err.contains(&format!(
            "{closed}/pool/main/p/postgresql-17/postgresql-17_17.99.orig.tar.bz2: curl: (7)"
        )),
        "{}",
        run.err
    );
}

/// `stat -c FORMAT PATH` (not following a symlink).
fn stat(format: &str, path: &Path) -> String {
    let out = Command::new("stat").args(["-c", format]).arg(path).output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn own_dir_refuses_a_directory_another_user_made_and_a_symlink() {
    assert!(
        running_as_root(),
        "this test makes a directory as another user (nobody): run it as root, as make test does"
    );
    let base = scratch_dir("own-dir");
    // A directory like /tmp: anyone may create names in it.
    check(Command::new("chmod").arg("1777").arg(&base).output().unwrap(), "chmod");
    let own_dir = |dir: &Path| {
        Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/own-dir.sh"))
            .arg(dir)
            .output()
            .unwrap()
    };
    for (name, mode) in [("made-by-nobody", "755"), ("open-to-all", "777")] {
        let dir = base.join(name);
        check(
            Command::new("runuser")
                .args(["-u", "nobody", "--", "mkdir", "-m", mode])
                .arg(&dir)
                .output()
                .unwrap(),
            "mkdir as nobody",
        );
        assert_eq!(stat("%U %a", &dir), format!("nobody {mode}"), "the tool took effect");
        let out = own_dir(&dir);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains("is not safe to use: it belongs to nobody"), "{err}");
        assert_eq!(stat("%U", &dir), "nobody", "{name} was not taken over");
    }
    // One of root's that others may write into (as a umask of 0 would leave it): refused.
    let open = base.join("open-to-others");
    fs::create_dir(&open).unwrap();
    check(Command::new("chmod").arg("777").arg(&open).output().unwrap(), "chmod");
    let out = own_dir(&open);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("belongs to root (mode 777)"), "{err}");
    // A symlink to a directory of root's: refused, and its target left as it was.
    let target = base.join("roots");
    fs::create_dir(&target).unwrap();
    let link = base.join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = own_dir(&link);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stat("%U", &target), "root");
    // A new one, and one inside it: postgres's, closed to others.
    let fresh = base.join("fresh");
    for dir in [fresh.clone(), fresh.join("15")] {
        let out = own_dir(&dir);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(stat("%U %a", &dir), "postgres 755");
    }
    // A second run takes what it made before.
    assert!(own_dir(&fresh).status.success());
}

/// `scripts/build-postgres.sh N` (what `PG=N` and `make test` run) on a machine whose
/// postgresql-N is not this project's: Debian's own 17, in a copy of the Debian 13 root, and a
/// PostgreSQL 18 that no package installed there. Each is refused before anything is
/// downloaded, saying to use PG_CONFIG, and left as it was.
#[test]
fn pg_n_never_replaces_a_postgresql_this_project_did_not_install() {
    let root = common::debian_root::DebianRoot::copy("trixie", "foreign-postgres");
    let src = root.path("/tmp/src/scripts");
    fs::create_dir_all(&src).unwrap();
    for entry in fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            fs::copy(&path, src.join(path.file_name().unwrap())).unwrap();
        }
    }
    // A PostgreSQL 18 from a source install: files, no package.
    let bin18 = root.path("/usr/lib/postgresql/18/bin");
    fs::create_dir_all(&bin18).unwrap();
    fs::copy(root.path("/usr/lib/postgresql/17/bin/postgres"), bin18.join("postgres")).unwrap();
    // Any download would go to a port nothing listens on, and fail differently.
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let debians = root.installed("postgresql-17");
    assert!(
        !debians.is_empty() && !debians.contains("pgsnowflake"),
        "the tool took effect: the root has Debian's postgresql-17, not {debians:?}"
    );
    for (major, what) in [
        ("17", format!("the package postgresql-17 {debians}")),
        (
            "18",
            "a PostgreSQL in /usr/lib/postgresql/18 that no package named postgresql-18 installed"
                .to_string(),
        ),
    ] {
        let mirror = format!("PG_SNOWFLAKE_DEBIAN_MIRROR={nowhere}");
        let out =
            root.try_run(&["env", &mirror, "bash", "/tmp/src/scripts/build-postgres.sh", major]);
        let err = String::from_utf8_lossy(&out.stderr);
        let all = format!("{}{err}", String::from_utf8_lossy(&out.stdout));
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(
            err.contains(&format!(
                "this machine has {what}, which pg_snowflake did not install; it is left alone."
            )),
            "{all}"
        );
        assert!(
            err.contains(&format!(
                "make install PG_CONFIG=/usr/lib/postgresql/{major}/bin/pg_config"
            )),
            "{all}"
        );
        assert!(!all.contains("downloading"), "{all}");
    }
    assert_eq!(root.installed("postgresql-17"), debians);
    assert!(root.path("/usr/lib/postgresql/17/bin/postgres").exists());
    assert!(bin18.join("postgres").exists());
}

/// `PG_CONFIG` naming psql (or any program of the server other than pg_config) is refused at
/// once, before anything is installed, naming the pg_config beside it.
#[test]
fn a_pg_config_that_is_psql_is_refused_naming_the_pg_config_beside_it() {
    let bindir = pg_config(&default_pg_config(), "--bindir");
    let psql = bindir.join("psql");
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/setup.sh"))
        .args(["build", "--pg-config"])
        .arg(&psql)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "PG_CONFIG={} is not a pg_config: it says \"psql (PostgreSQL) ",
            psql.display()
        )),
        "{err}"
    );
    assert!(err.contains(&format!("such as {}", bindir.join("pg_config").display())), "{err}");
    assert!(!err.contains("installing"), "{err}");
}

/// Suites that scripts/test-suites.py runs side by side never hand out one port twice: each
/// lane takes its ports from a block of its own. This binary runs itself as lane 0 of 2 and as
/// lane 1 of 2 (`hand_out_ports` prints what `free_port` gave), and every port of lane 0 lies
/// below every port of lane 1. Without the blocks both lanes spread over the same range.
#[test]
fn suites_in_different_lanes_take_ports_from_different_blocks() {
    let ports_of = |lane: &str| -> Vec<u32> {
        let out = check(
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "hand_out_ports", "--ignored", "--nocapture"])
                .env("PG_SNOWFLAKE_TEST_LANE", lane)
                .output()
                .unwrap(),
            "hand_out_ports",
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("port ")?.parse().ok())
            .collect()
    };
    let (low, high) = (ports_of("0/2"), ports_of("1/2"));
    for ports in [&low, &high] {
        assert_eq!(ports.len(), 100, "the tool took effect: {ports:?}");
        let mut distinct = ports.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 100, "a port handed out twice: {ports:?}");
    }
    let (low_max, high_min) = (low.iter().max().unwrap(), high.iter().min().unwrap());
    assert!(
        low_max < high_min,
        "lane 0 took {low_max}, above lane 1's {high_min}:\n{low:?}\n{high:?}"
    );
    // Below the ports the kernel gives outgoing connections, which could take one first.
    let range = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
    let ephemeral_low: u32 = range.split_whitespace().next().unwrap().parse().unwrap();
    let high_max = high.iter().max().unwrap();
    assert!(*high_max < ephemeral_low, "lane 1 took {high_max}, in the ephemeral range {range}");
}

/// Run by the test above, as one lane.
#[test]
#[ignore = "run by suites_in_different_lanes_take_ports_from_different_blocks"]
fn hand_out_ports() {
    for _ in 0..100 {
        println!("port {}", free_port());
    }
}

/// A suite's `//! Majors:` line, as scripts/test-suites.py reads it for a run (and for
/// scripts/setup.sh, `--majors-of`): the majors it names are printed; a line that starts like
/// a mark but is none, a second mark, or a major outside the run's majors stops everything,
/// naming the file, for the suite would otherwise run on every major or on none.
#[test]
fn a_suites_majors_mark_is_checked_as_a_run_checks_it() {
    let dir = scratch_dir("marks");
    let majors_of = |text: &str| {
        let file = dir.join("suite.rs");
        fs::write(&file, format!("//! A suite.\n{text}\n#[test]\nfn t() {{}}\n")).unwrap();
        let out =
            Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-suites.py"))
                .arg("--majors-of")
                .arg(&file)
                .arg("--majors=15 16 17 18 19")
                .output()
                .unwrap();
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap().trim().to_string();
        (out.status.success(), text(out.stdout), text(out.stderr))
    };
    let suite = dir.join("suite.rs").display().to_string();
    assert_eq!(majors_of("//! Majors: 15 17.\n//! Why."), (true, "15 17".into(), String::new()));
    assert_eq!(majors_of("//! Runs everywhere."), (true, String::new(), String::new()));
    for (mark, said) in [
        ("//! Majors: 15, 17.", "'//! Majors: 15, 17.' is not `//! Majors: 15 17.`"),
        ("//! Majors: 15 17", "'//! Majors: 15 17' is not `//! Majors: 15 17.`"),
        ("//! Majors: 17.\n//! Majors: 18.", "has 2 lines `//! Majors:`, where one is allowed"),
        ("//! Majors: 14 17.", "is marked for 14 17, beyond the majors 15 16 17 18 19"),
    ] {
        let (ok, stdout, stderr) = majors_of(mark);
        assert!(!ok && stdout.is_empty(), "{mark}: {stdout}");
        assert!(stderr.starts_with(&format!("test-suites: {suite}")), "{mark}: {stderr}");
        assert!(stderr.contains(said), "{mark}: {stderr}");
    }
    fs::remove_dir_all(dir).unwrap();
}

/// What a failed or killed test left in the clusters' directory goes at the next run: the
/// first cluster a test binary makes removes each `name-PID-n` of a process that has ended and
/// in which nothing changed for 10 minutes, unless a server still runs there (a postmaster.pid
/// naming a live postgres, as deep as a Debian root's servers keep theirs). This binary runs
/// itself (`make_a_scratch_directory`) as that next run. Without it, a day of runs left 21 GB
/// and CI failed at initdb with no space left.
#[test]
fn directories_of_ended_runs_go_at_the_next_run_unless_a_server_runs_there() {
    let ended = {
        let mut child = Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        child.id()
    };
    let server = Cluster::init("leftover_server", &[]);
    server.start();
    let postmaster = live_postmaster_pid(&server.data()).expect("the server runs");
    let scratch = scratch_dir("leftovers");
    let base = scratch.parent().unwrap().to_path_buf();
    let dir = |name: String, pid_file: Option<u32>| {
        let dir = base.join(name);
        let data = dir.join("root/var/lib/postgresql/x/data");
        fs::create_dir_all(&data).unwrap();
        if let Some(pid) = pid_file {
            files::write(&data.join("postmaster.pid"), format!("{pid}\n/some/data\n")).unwrap();
        }
        dir
    };
    let gone = dir(format!("leftover_failed-{ended}-3"), None);
    let just_failed = dir(format!("leftover_just_failed-{ended}-2"), None);
    let of_a_live_test = dir(format!("leftover_live-{}-7", std::process::id()), None);
    let server_runs = dir(format!("leftover_server-{ended}-4"), Some(postmaster as u32));
    let server_ended = dir(format!("leftover_server_ended-{ended}-5"), Some(ended));
    // A live process that is no server: this test's own.
    let no_server = dir(format!("leftover_no_server-{ended}-6"), Some(std::process::id()));
    // A FIFO under the name: read, it would wait for a writer for good.
    let fifo = dir(format!("leftover_fifo-{ended}-8"), None);
    let pid_fifo = fifo.join("root/var/lib/postgresql/x/data/postmaster.pid");
    check(Command::new("mkfifo").arg(&pid_fifo).output().unwrap(), "mkfifo");
    // No run's name: no run removes it, so this test does, failed or not.
    let not_ours = dir(format!("leftover-not-a-pid-{ended}"), None);
    struct RemovedAtEnd(std::path::PathBuf);
    impl Drop for RemovedAtEnd {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
    let _not_ours_goes = RemovedAtEnd(not_ours.clone());
    // Everything but `just_failed` last changed an hour ago.
    for path in [&gone, &of_a_live_test, &server_runs, &server_ended, &no_server, &fifo, &not_ours]
    {
        check(
            Command::new("find")
                .arg(path)
                .args(["-exec", "touch", "-h", "-d", "1 hour ago", "{}", "+"])
                .output()
                .unwrap(),
            "find -exec touch",
        );
    }

    let out = check(
        Command::new("timeout")
            .arg("120")
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", "make_a_scratch_directory", "--ignored", "--nocapture"])
            .output()
            .unwrap(),
        "make_a_scratch_directory",
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let made = stdout.lines().find_map(|l| l.strip_prefix("made ")).expect("the tool took effect");
    // Another suite's first cluster may have removed it already.
    let _ = fs::remove_dir_all(made);
    for (path, kept) in [
        (&gone, false),
        (&server_ended, false),
        (&no_server, false),
        (&fifo, false),
        (&just_failed, true),
        (&of_a_live_test, true),
        (&server_runs, true),
        (&not_ours, true),
    ] {
        assert_eq!(path.exists(), kept, "{}", path.display());
    }
    for path in [just_failed, of_a_live_test, server_runs, scratch] {
        fs::remove_dir_all(path).unwrap();
    }
}

/// Run by the test above, as the next run.
#[test]
#[ignore = "run by directories_of_ended_runs_go_at_the_next_run_unless_a_server_runs_there"]
fn make_a_scratch_directory() {
    println!("made {}", scratch_dir("next_run").display());
}

/// A file of other content under the name of Citus's archive stops scripts/build-citus.sh before
/// it unpacks anything, naming both checksums and where it looked, with or without
/// `--missing-ok`; the server's directories are left empty (no library, no stamp).
#[test]
fn build_citus_refuses_an_archive_with_another_sha256_and_installs_nothing() {
    let dir = scratch_dir("citus_vendor");
    let (lib, share) = (dir.join("lib"), dir.join("share"));
    fs::create_dir_all(&lib).unwrap();
    fs::create_dir_all(share.join("extension")).unwrap();
    // A PostgreSQL 17 of its own, whose pg_config names those directories.
    let pg_config = dir.join("pg_config");
    fs::write(
        &pg_config,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  --version) echo 'PostgreSQL 17.11' ;;\n  \
             --pkglibdir) echo '{}' ;;\n  --sharedir) echo '{}' ;;\n  \
             --includedir-server) echo '{}' ;;\nesac\n",
            lib.display(),
            share.display(),
            dir.join("include").display()
        ),
    )
    .unwrap();
    check(Command::new("chmod").arg("755").arg(&pg_config).output().unwrap(), "chmod");
    let vendor = dir.join("vendor");
    fs::create_dir_all(&vendor).unwrap();
    fs::write(vendor.join("citus-14.0.1.tar.gz"), b"not the release").unwrap();
    let expected = String::from_utf8(
        Command::new(root_dir().join("scripts/build-citus.sh"))
            .args(["--version", "17"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(expected.trim(), "14.0.1");
    for args in [&["17"][..], &["--missing-ok", "17"][..]] {
        let out = Command::new(root_dir().join("scripts/build-citus.sh"))
            .args(args)
            .env("PG_SNOWFLAKE_VENDOR", &vendor)
            .env("CITUS_PG_CONFIG", &pg_config)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded:\n{err}");
        assert!(
            err.contains("has the wrong sha256; nothing was built")
                && err.contains("26ddb8ec9de07c5fa8426e435d10936e5cd6bed01a5ad94aab92e818081e5ec9")
                && err.contains(&vendor.display().to_string()),
            "{args:?}:\n{err}"
        );
        for d in [&lib, &share.join("extension")] {
            let left: Vec<_> = fs::read_dir(d).unwrap().collect();
            assert!(left.is_empty(), "{args:?} left files in {}", d.display());
        }
    }
}

/// A build with `PG_SNOWFLAKE_MUTANT` set has a guard removed (core/src/mutant.rs): every target
/// of the Makefile refuses to start while it is set, before anything is built, tested or
/// installed (`-n`: without the refusal, nothing would run either, and the test fails).
#[test]
fn make_refuses_every_target_while_a_guard_is_removed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for target in ["install", "check", "test-unit", "package"] {
        let out = Command::new("make")
            .arg("-n")
            .arg("-C")
            .arg(root)
            .arg(target)
            .env("PG_SNOWFLAKE_MUTANT", "cas")
            .env_remove("MAKEFLAGS")
            .env_remove("MAKELEVEL")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "make {target}: {err}");
        assert!(
            err.contains("PG_SNOWFLAKE_MUTANT=cas removes a guard (core/src/mutant.rs): unset it"),
            "make {target}: {err}"
        );
    }
}
