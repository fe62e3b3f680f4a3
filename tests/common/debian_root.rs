//! Debian's own PostgreSQL, in a Debian root made by `scripts/debian-root.sh` (debootstrap):
//! trixie's postgresql-17, sid's postgresql-18 and experimental's postgresql-19 (in a root of
//! sid, where `make test` runs the tests of 19), as a distribution built them. Each test works
//! in a copy of the cached root, so that what it installs, and the clusters it makes, go away
//! with it, and the host's PostgreSQL and dpkg database are never touched.
//!
//! Commands run inside the copy as root, through `scripts/debian-root.sh run` (a mount namespace
//! of their own); servers run there as the root's own `postgres` user and listen on the host's
//! 127.0.0.1, where the tests connect as to any other cluster.

use super::*;

/// The Debian root whose suite packages `major` as a binary package, if any (see
/// scripts/debian-root.sh: neither trixie nor sid has 15 or 16; 19 is experimental's, in a root
/// of sid of its own).
pub fn suite_of(major: &str) -> Option<&'static str> {
    match major {
        "17" => Some("trixie"),
        "18" => Some("sid"),
        "19" => Some("sid-19"),
        _ => None,
    }
}

/// A throwaway copy of the Debian root of one suite.
pub struct DebianRoot {
    pub suite: String,
    pub major: String,
    /// The scratch directory that holds the copy (`root`) and what the test keeps beside it.
    pub scratch: PathBuf,
    pub dir: PathBuf,
}

impl DebianRoot {
    /// Makes the suite's root if this machine has none yet (once: about a minute), then copies
    /// it for this test.
    pub fn copy(suite: &str, name: &str) -> DebianRoot {
        assert!(
            running_as_root(),
            "a Debian root needs root (debootstrap, chroot): run the tests as root, as make test does"
        );
        // Two tests of one binary may ask at once: the first makes the root, the other waits.
        static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let cached = {
            let _one = MAKING.lock().unwrap_or_else(|e| e.into_inner());
            let out = check(
                Command::new(root_dir().join("scripts/debian-root.sh"))
                    .args(["make", suite])
                    .output()
                    .unwrap(),
                &format!("scripts/debian-root.sh make {suite}"),
            );
            PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
        };
        let major = String::from_utf8(
            check(
                Command::new(root_dir().join("scripts/debian-root.sh"))
                    .args(["major", suite])
                    .output()
                    .unwrap(),
                "scripts/debian-root.sh major",
            )
            .stdout,
        )
        .unwrap()
        .trim()
        .to_string();
        let scratch = scratch_dir(name);
        let dir = scratch.join("root");
        check(
            Command::new("cp")
                .args(["-a", "--reflink=auto"])
                .arg(&cached)
                .arg(&dir)
                .output()
                .unwrap(),
            "cp -a of the Debian root",
        );
        DebianRoot { suite: suite.into(), major, scratch, dir }
    }

    /// `args` run inside the root as root; fails the test unless it succeeds.
    pub fn run(&self, args: &[&str]) -> String {
        let out = self.try_run(args);
        let out = check(out, &format!("{} (in the {} root)", args.join(" "), self.suite));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn try_run(&self, args: &[&str]) -> Output {
        Command::new(root_dir().join("scripts/debian-root.sh"))
            .arg("run")
            .arg(&self.dir)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The host path of a path inside the root.
    pub fn path(&self, inside: &str) -> PathBuf {
        self.dir.join(inside.trim_start_matches('/'))
    }

    /// Puts a host file into the root's /tmp; returns its path inside the root.
    pub fn put(&self, file: &Path) -> String {
        let inside = format!("/tmp/{}", file.file_name().unwrap().to_string_lossy());
        fs::copy(file, self.path(&inside)).unwrap();
        inside
    }

    /// The version of an installed package, or "" when it is not installed.
    pub fn installed(&self, package: &str) -> String {
        let out = self.try_run(&["dpkg-query", "-W", "-f=${Status} ${Version}", package]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.strip_prefix("install ok installed ").unwrap_or("").to_string()
    }

    /// The root's Debian PostgreSQL's programs.
    pub fn bindir(&self) -> String {
        format!("/usr/lib/postgresql/{}/bin", self.major)
    }
}

impl Drop for DebianRoot {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("the Debian root of the failed test is in {}", self.dir.display());
        } else {
            let _ = fs::remove_dir_all(&self.scratch);
        }
    }
}

/// A cluster of the root's Debian PostgreSQL, run by the root's `postgres` user, its data in
/// the root's /var/lib/postgresql/NAME. With libfaketime from the root's own package, so that a
/// test can set its clock back (`set_clock`), checked on the server.
pub struct RootCluster<'a> {
    root: &'a DebianRoot,
    pub name: String,
    pub port: u16,
    clock_file: String,
}

impl<'a> RootCluster<'a> {
    fn data(&self) -> String {
        format!("/var/lib/postgresql/{}/data", self.name)
    }

    fn log(&self) -> String {
        files::read_to_string(&self.root.path(&format!("/var/lib/postgresql/{}.log", self.name)))
            .unwrap_or_default()
    }

    /// A command as the root's postgres user, with the fake clock in its environment.
    fn as_postgres(&self, program: &str, args: &[&str]) -> Output {
        let faketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
        assert!(
            self.root.path(faketime).exists(),
            "libfaketime is missing from the {} root",
            self.root.suite
        );
        let program = format!("{}/{program}", self.root.bindir());
        let preload = format!("LD_PRELOAD={faketime}");
        let clock = format!("FAKETIME_TIMESTAMP_FILE={}", self.clock_file);
        let mut all = vec![
            "runuser",
            "-u",
            "postgres",
            "--",
            "env",
            &preload,
            &clock,
            "FAKETIME_NO_CACHE=1",
            "FAKETIME_DONT_FAKE_MONOTONIC=1",
            &program,
        ];
        all.extend_from_slice(args);
        self.root.try_run(&all)
    }

    /// initdb, with pg_snowflake preloaded, worker id 1, and `conf`; not started.
    pub fn init(root: &'a DebianRoot, name: &str, conf: &[&str]) -> RootCluster<'a> {
        let cluster = RootCluster::unmade(root, name);
        let data = cluster.data();
        check(
            cluster.as_postgres(
                "initdb",
                &["-A", "trust", "-U", "postgres", "--no-sync", "-D", &data],
            ),
            "initdb in the Debian root",
        );
        cluster.append_conf(&server_conf(cluster.port, conf));
        cluster
    }

    fn unmade(root: &'a DebianRoot, name: &str) -> RootCluster<'a> {
        let clock_file = format!("/var/lib/postgresql/{name}.faketime");
        let cluster = RootCluster { root, name: name.into(), port: free_port(), clock_file };
        cluster.set_clock_file(0.0);
        cluster
    }

    fn append_conf(&self, lines: &[String]) {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let conf = self.root.path(&format!("{}/postgresql.conf", self.data()));
        files::append(&conf, text.as_bytes()).unwrap();
    }

    /// A streaming standby of this running cluster (pg_basebackup -R); not started.
    pub fn basebackup(&self, name: &str) -> RootCluster<'a> {
        let standby = RootCluster::unmade(self.root, name);
        let data = standby.data();
        let port = self.port.to_string();
        check(
            self.as_postgres(
                "pg_basebackup",
                &[
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port,
                    "-U",
                    "postgres",
                    "-R",
                    "-X",
                    "stream",
                    "-c",
                    "fast",
                    "-D",
                    &data,
                ],
            ),
            "pg_basebackup in the Debian root",
        );
        standby.append_conf(&[format!("port = {}", standby.port)]);
        standby
    }

    fn set_clock_file(&self, offset_s: f64) {
        super::write_clock_file(&self.root.path(&self.clock_file), offset_s);
    }

    /// Moves the server's clock `offset_s` from the real time, from its next start on (and at
    /// once if it runs: libfaketime reads the file at every call); checked once it runs.
    pub fn set_clock(&self, offset_s: f64) {
        self.set_clock_file(offset_s);
    }

    pub fn start(&self, clock_offset_s: f64) {
        self.set_clock_file(clock_offset_s);
        let data = self.data();
        let log = format!("/var/lib/postgresql/{}.log", self.name);
        let out = self.as_postgres("pg_ctl", &["start", "-w", "-t", "60", "-D", &data, "-l", &log]);
        assert!(
            out.status.success(),
            "pg_ctl start in the Debian root failed:\n{}\n--- server log ---\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        // libfaketime took effect: the server's clock is where the file says.
        assert_clock_offset(&mut self.connect(), clock_offset_s, &self.name);
    }

    pub fn stop(&self, mode: &str) {
        let data = self.data();
        check(
            self.as_postgres("pg_ctl", &["stop", "-w", "-t", "60", "-m", mode, "-D", &data]),
            "pg_ctl stop in the Debian root",
        );
    }

    pub fn promote(&self) {
        let data = self.data();
        check(
            self.as_postgres("pg_ctl", &["promote", "-w", "-t", "60", "-D", &data]),
            "pg_ctl promote in the Debian root",
        );
    }

    pub fn connect(&self) -> Client {
        Client::connect(
            &format!(
                "host=127.0.0.1 port={} user=postgres dbname=postgres connect_timeout=10",
                self.port
            ),
            NoTls,
        )
        .unwrap_or_else(|e| panic!("connect to {}: {e}\n{}", self.name, self.log()))
    }
}

impl Drop for RootCluster<'_> {
    fn drop(&mut self) {
        let data = self.data();
        if self.root.path(&format!("{data}/postmaster.pid")).exists() {
            let _ = self.as_postgres("pg_ctl", &["stop", "-w", "-m", "immediate", "-D", &data]);
        }
        if std::thread::panicking() {
            eprintln!("--- server log of {} ---\n{}", self.name, self.log());
        }
    }
}
