//! Earlier releases as their users have them: the Debian packages of 0.2.0, 0.3.0 and 0.5.0,
//! built from those releases' commits (a few minutes the first time, then kept in
//! target/package), for the tests that meet them (tests/packaging/package.rs upgrades 0.2.0's on
//! 15, tests/packaging/repo.rs upgrades 0.3.0's, tests/registry/registry.rs runs a member of
//! 0.3.0, tests/packaging/image.rs updates from 0.5.0's extension image).

use super::*;

/// The commits of earlier releases (the history of main has them).
pub const RELEASE_0_2_0: &str = "5c3df56f7c3d9bfe1bd344ba008ea50c7a974e1b";
pub const RELEASE_0_3_0: &str = "ee29060";
pub const RELEASE_0_4_0: &str = "60d7897";
pub const RELEASE_0_5_0: &str = "a24ba2ec5fbaec941645ca118889573386e3088d";

/// This release's version, from Cargo.toml.
pub fn version() -> String {
    let toml = fs::read_to_string(root_dir().join("Cargo.toml")).unwrap();
    toml.lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .unwrap()
        .trim_end_matches('"')
        .to_string()
}

pub fn deb(major: &str, version: &str) -> PathBuf {
    root_dir().join(format!("target/package/postgresql-{major}-pg-snowflake_{version}-1_amd64.deb"))
}

/// The package of the earlier release `version`, made at `commit`, for the major of
/// `PG_CONFIG`: built from a worktree of that commit by this release's scripts/package.sh the
/// first time, then kept in target/package.
pub fn package_of_release(version: &str, commit: &str) -> PathBuf {
    let deb = deb(&major_under_test(), version);
    if deb.exists() {
        return deb;
    }
    let old = root_dir().join(format!("target/package/release-{version}"));
    if !old.join("Cargo.toml").exists() {
        check(
            Command::new("git")
                .current_dir(root_dir())
                .args(["worktree", "add", "--force", "--detach"])
                .arg(&old)
                .arg(commit)
                .output()
                .unwrap(),
            &format!("git worktree add of the {version} release (is the history of main cloned?)"),
        );
    }
    // On the machine's network: the first build downloads that release's crates (its own pgrx).
    check(
        private_network::with_host_network(
            Command::new(root_dir().join("scripts/package.sh")).arg(default_pg_config()).arg(&old),
        )
        .output()
        .unwrap(),
        &format!("scripts/package.sh of {version}"),
    );
    deb
}

/// The package of 0.3.0 for the major of `PG_CONFIG`.
pub fn package_of_0_3_0() -> PathBuf {
    package_of_release("0.3.0", RELEASE_0_3_0)
}

/// A copy of the server that `PG_CONFIG` names (its binaries, libraries and shared files, laid
/// out as Debian's) with no pg_snowflake in it: a PostgreSQL as a container image without the
/// extension holds it, or, with a package unpacked over it, one whose pg_snowflake is another
/// release's, beside the system's with this one. Returns its pg_config.
pub fn server_copy(name: &str) -> String {
    copy_of_server(name).1
}

/// `server_copy`: the directory the copy is in, and its pg_config.
fn copy_of_server(name: &str) -> (PathBuf, String) {
    let pg_config_path = default_pg_config();
    let prefix = scratch_dir(name);
    let bindir = pg_config(&pg_config_path, "--bindir");
    let sharedir = pg_config(&pg_config_path, "--sharedir");
    let pkglibdir = pg_config(&pg_config_path, "--pkglibdir");
    // Debian's layout: /usr/lib/postgresql/N/{bin,lib} and /usr/share/postgresql/N, found
    // relative to the binaries, so the copy keeps the same relative places.
    let lib_tree = bindir.parent().unwrap();
    let inside = |p: &Path| prefix.join(p.strip_prefix("/").unwrap());
    for from in [lib_tree, sharedir.as_path()] {
        let to = inside(from);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        check(
            Command::new("cp").arg("-a").arg(from).arg(&to).output().unwrap(),
            "cp -a of the server",
        );
    }
    let _ = fs::remove_file(inside(&pkglibdir).join("pg_snowflake.so"));
    for f in fs::read_dir(inside(&sharedir).join("extension")).unwrap() {
        let f = f.unwrap();
        if f.file_name().to_string_lossy().starts_with("pg_snowflake") {
            fs::remove_file(f.path()).unwrap();
        }
    }
    check(Command::new("chmod").args(["-R", "a+rX"]).arg(&prefix).output().unwrap(), "chmod");
    let copied = inside(lib_tree).join("bin/pg_config").display().to_string();
    (prefix, copied)
}

/// `server_copy` with the package of 0.3.0 unpacked over it.
pub fn server_with_0_3_0(name: &str) -> String {
    let deb = package_of_0_3_0();
    let (prefix, pg_config_path) = copy_of_server(name);
    check(
        Command::new("dpkg").arg("-x").arg(&deb).arg(&prefix).output().unwrap(),
        "dpkg -x of the 0.3.0 package",
    );
    check(Command::new("chmod").args(["-R", "a+rX"]).arg(&prefix).output().unwrap(), "chmod");
    pg_config_path
}
