//! The extension image (scripts/image.sh, `make image`) as CloudNativePG uses it: an OCI image
//! whose only files are the package's `/lib/pg_snowflake.so` and `/share/extension/*`,
//! unpacked as an image volume is mounted, into a PostgreSQL with no pg_snowflake of its own (a
//! copy of the server `PG_CONFIG` names, without the extension's files: the operand image), with
//! `extension_control_path` and `dynamic_library_path` set exactly as the operator sets them
//! (`$system:<mount>/share`, `$libdir:<mount>/lib`; pkg/postgres/configuration.go of
//! CloudNativePG 1.30). The mount is a scratch directory in place of `/extensions/pg_snowflake`.
//!
//! Majors: 18 19. extension_control_path is new in 18. Run by `make test-package`, after the
//! package the image is made of (`make package`), not among the black-box suites.
#![cfg(not(feature = "pg_test"))]

use common::image::Image;
use common::pg_config as pg_config_of;
use common::release::{deb, package_of_release, server_copy, version, RELEASE_0_5_0};
use common::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use testkit as common;

/// This release's package for the major under test, which `make test-package` has just built.
fn this_release() -> PathBuf {
    let deb = deb(&major_under_test(), &version());
    assert!(deb.exists(), "{} is missing: run `make package`", deb.display());
    deb
}

/// The lines CloudNativePG writes for one extension mounted at `mount`, and the preload a
/// `Cluster` asks for in `.spec.postgresql.shared_preload_libraries`.
fn mounted_at(mount: &Path) -> Vec<String> {
    vec![
        format!("extension_control_path = '$system:{}/share'", mount.display()),
        format!("dynamic_library_path = '$libdir:{}/lib'", mount.display()),
        "shared_preload_libraries = 'pg_snowflake'".into(),
    ]
}

fn cluster_mounting(name: &str, pg_config: &str, mount: &Path) -> Cluster {
    let conf = mounted_at(mount);
    Cluster::init_server(name, pg_config, &[], &conf.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The library the postmaster has mapped, from /proc/PID/maps: where the server loaded it from.
fn loaded_library(cluster: &Cluster) -> String {
    let pid = cluster.postmaster_pid().expect("the server runs");
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let libraries: std::collections::BTreeSet<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.ends_with("/pg_snowflake.so"))
        .map(str::to_string)
        .collect();
    assert_eq!(libraries.len(), 1, "the postmaster maps one pg_snowflake.so: {libraries:?}");
    libraries.into_iter().next().unwrap()
}

#[test]
fn the_image_holds_the_packages_extension_files_and_nothing_else() {
    let deb = this_release();
    let image = Image::of_package(&deb, "image_files");
    let major = major_under_test();
    let tag = image.tag().to_string();
    assert!(tag.starts_with(&format!("{}-{major}-", version())), "tag {tag}");

    // A standard tool reads the layout: its index, the manifest and the config.
    // (The manifest's media type is in the index's descriptor of it: umoci 0.4.7 leaves the
    // manifest's own optional field out.)
    let index = image.index();
    let described = &index["manifests"][0];
    assert_eq!(described["mediaType"], "application/vnd.oci.image.manifest.v1+json");
    assert_eq!(described["annotations"]["org.opencontainers.image.ref.name"], tag.as_str());
    let manifest = image.manifest();
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(manifest["config"]["mediaType"], "application/vnd.oci.image.config.v1+json");
    let inspected = image.inspect();
    assert_eq!(inspected["Os"], "linux");
    assert_eq!(inspected["Architecture"], "amd64");
    assert_eq!(inspected["Labels"]["org.opencontainers.image.version"], version().as_str());
    assert_eq!(inspected["Layers"].as_array().unwrap().len(), 1, "one layer: {inspected}");

    // Its files are the package's extension files, at CloudNativePG's places, and nothing else.
    let listed =
        check(Command::new("dpkg-deb").arg("-c").arg(&deb).output().unwrap(), "dpkg-deb -c");
    let mut wanted = vec!["lib/".to_string(), "share/".into(), "share/extension/".into()];
    for line in String::from_utf8_lossy(&listed.stdout).lines() {
        let path = line.split_whitespace().last().unwrap();
        let lib = path.strip_prefix(&format!("./usr/lib/postgresql/{major}/lib/"));
        let ext = path.strip_prefix(&format!("./usr/share/postgresql/{major}/extension/"));
        match (lib, ext) {
            (Some(f), _) if !f.is_empty() => wanted.push(format!("lib/{f}")),
            (_, Some(f)) if !f.is_empty() => wanted.push(format!("share/extension/{f}")),
            _ => {}
        }
    }
    wanted.sort();
    // Owned by root, readable by all, written by none but root, nothing set-id or linked.
    let entries = image.entries();
    for (mode, owner, path) in &entries {
        let wanted = if path.ends_with('/') || path == "." { "drwxr-xr-x" } else { "-rw-r--r--" };
        assert_eq!((mode.as_str(), owner.as_str()), (wanted, "0/0"), "{path} in the image");
    }
    // (Less the layer's root, `./`, which the volume's root is.)
    let paths: Vec<String> = entries
        .into_iter()
        .map(|(_, _, p)| p.trim_start_matches("./").to_string())
        .filter(|p| !p.is_empty() && p != ".")
        .collect();
    assert_eq!(paths, wanted, "the image's paths against the package's extension files");
    assert!(wanted.iter().any(|p| p.starts_with("share/extension/pg_snowflake--0.5.0--")));

    // Byte for byte the package's files.
    let unpacked = scratch_dir("image_files_deb");
    check(
        Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked).output().unwrap(),
        "dpkg-deb -x",
    );
    let mount = scratch_dir("image_files_mount").join("pg_snowflake");
    image.unpack_into(&mount);
    for p in wanted.iter().filter(|p| !p.ends_with('/')) {
        let in_deb = match p.strip_prefix("lib/") {
            Some(f) => format!("usr/lib/postgresql/{major}/lib/{f}"),
            None => format!("usr/share/postgresql/{major}/{}", p.strip_prefix("share/").unwrap()),
        };
        assert!(
            fs::read(mount.join(p)).unwrap() == fs::read(unpacked.join(&in_deb)).unwrap(),
            "{p} differs from the package's {in_deb}"
        );
    }
    eprintln!(
        "image {tag}: {} bytes in its layout, digest {}",
        image.size(),
        inspected["Digest"].as_str().unwrap()
    );
}

#[test]
fn a_server_without_the_extension_makes_ids_from_the_image_as_cloudnativepg_mounts_it() {
    let image = Image::of_package(&this_release(), "image_server");
    let pg_config = server_copy("image_server_pg");
    let mount = scratch_dir("image_server_volume").join("pg_snowflake");
    image.unpack_into(&mount);

    // The operand has no pg_snowflake of its own: without the image's paths it cannot preload it.
    let without = Cluster::init_server(
        "image_server_without",
        &pg_config,
        &[],
        &["shared_preload_libraries = 'pg_snowflake'"],
    );
    let log = without.start_fails();
    assert!(log.contains("could not access file \"pg_snowflake\""), "{log}");

    let cluster = cluster_mounting("image_server", &pg_config, &mount);
    cluster.start();
    assert_eq!(loaded_library(&cluster), mount.join("lib/pg_snowflake.so").display().to_string());
    let mut c = cluster.connect();
    // The server's own share/ is the copy's, and the control file comes from the image: without
    // the image's path, the server offers no pg_snowflake.
    let sharedir: String = c.scalar("SELECT setting FROM pg_config WHERE name = 'SHAREDIR'");
    let own = pg_config_of(&default_pg_config(), "--bindir").join("pg_config");
    let copy = pg_config.strip_suffix(own.to_str().unwrap()).unwrap();
    assert!(
        !copy.is_empty() && sharedir.starts_with(copy),
        "the server's share/ is {sharedir}, not the copy's in {copy}"
    );
    let offered = |c: &mut Client| -> i64 {
        c.scalar("SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_snowflake'")
    };
    c.batch_execute("SET extension_control_path = '$system'").unwrap();
    assert_eq!(offered(&mut c), 0, "the server's own share/ offers pg_snowflake");
    c.batch_execute("RESET extension_control_path").unwrap();
    assert_eq!(offered(&mut c), 1);
    let (default_version, installed): (String, Option<String>) = {
        let row = c
            .query_one(
                "SELECT default_version, installed_version FROM pg_available_extensions
                  WHERE name = 'pg_snowflake'",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!((default_version.as_str(), installed), (version().as_str(), None));
    c.batch_execute("CREATE EXTENSION pg_snowflake").unwrap();
    let before = ids(&mut c, "SELECT snowflake_next() FROM generate_series(1, 10000)");
    assert_strictly_increasing(&before, "ids from the image's library");
    let (_, worker, _) = decode_id(&mut c, *before.last().unwrap());
    assert_eq!(worker, 1);
    drop(c);

    // A restart (a pod's, with the same volume): ids go on above.
    cluster.restart("fast");
    assert_eq!(loaded_library(&cluster), mount.join("lib/pg_snowflake.so").display().to_string());
    let mut c = cluster.connect();
    let after = ids(&mut c, "SELECT snowflake_next() FROM generate_series(1, 1000)");
    assert_above_all(&before, &after, "a restart from the image");
    cluster.stop("fast");
}

#[test]
fn an_image_of_0_5_0_swapped_for_this_releases_updates_the_extension() {
    let old = Image::of_package(&package_of_release("0.5.0", RELEASE_0_5_0), "image_0_5_0");
    assert!(old.tag().starts_with("0.5.0-"), "{}", old.tag());
    let new = Image::of_package(&this_release(), "image_update");
    let pg_config = server_copy("image_update_pg");
    let mount = scratch_dir("image_update_volume").join("pg_snowflake");

    old.unpack_into(&mount);
    let cluster = cluster_mounting("image_update", &pg_config, &mount);
    cluster.start();
    let mut c = cluster.connect();
    c.batch_execute("CREATE EXTENSION pg_snowflake").unwrap();
    let version_of = |c: &mut Client| -> String {
        c.scalar("SELECT extversion FROM pg_extension WHERE extname = 'pg_snowflake'")
    };
    assert_eq!(version_of(&mut c), "0.5.0");
    let before = ids(&mut c, "SELECT snowflake_next() FROM generate_series(1, 10000)");
    drop(c);
    cluster.stop("fast");

    // The Cluster's image reference changed: the pod starts again with the new volume.
    new.unpack_into(&mount);
    cluster.start();
    let mut c = cluster.connect();
    assert_eq!(version_of(&mut c), "0.5.0", "the database keeps 0.5.0's objects until the update");
    // The new library serves 0.5.0's objects until then.
    let between = ids(&mut c, "SELECT snowflake_next() FROM generate_series(1, 1000)");
    assert_above_all(&before, &between, "this release's library under 0.5.0's objects");
    c.batch_execute("ALTER EXTENSION pg_snowflake UPDATE").unwrap();
    assert_eq!(version_of(&mut c), version());
    let after = ids(&mut c, "SELECT snowflake_next() FROM generate_series(1, 10000)");
    assert_above_all(&between, &after, "the update from 0.5.0's image");
    let (_, worker, _) = decode_id(&mut c, *after.last().unwrap());
    assert_eq!(worker, 1);
    cluster.stop("fast");
}

/// A package with a link in it (to a file of the machine that builds the image, or to its own
/// PostgreSQL's directories) or a FIFO makes no image: the image would carry that machine's
/// files, or the build would wait for ever. Whatever was at the layout's place stays.
#[test]
fn a_package_with_links_or_fifos_in_it_makes_no_image() {
    let deb = this_release();
    let major = major_under_test();
    let dir = scratch_dir("image_links");
    let kept = Image::of_package(&deb, "image_links_kept");
    for odd in ["link", "fifo"] {
        let tree = dir.join(odd);
        check(
            Command::new("dpkg-deb").arg("-R").arg(&deb).arg(&tree).output().unwrap(),
            "dpkg-deb -R",
        );
        let so = tree.join(format!("usr/lib/postgresql/{major}/lib/pg_snowflake.so"));
        fs::remove_file(&so).unwrap();
        match odd {
            "link" => std::os::unix::fs::symlink("/etc/hostname", &so).unwrap(),
            _ => {
                check(Command::new("mkfifo").arg(&so).output().unwrap(), "mkfifo");
            }
        }
        let odd_deb = dir.join(format!("{odd}.deb"));
        check(
            Command::new("dpkg-deb")
                .args(["--root-owner-group", "-b"])
                .arg(&tree)
                .arg(&odd_deb)
                .output()
                .unwrap(),
            "dpkg-deb -b",
        );
        let out = Command::new("timeout")
            .arg("60")
            .arg(root_dir().join("scripts/image.sh"))
            .arg(&odd_deb)
            .arg(kept.layout())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "an image was made of a package with a {odd} in it");
        assert!(
            said.contains("holds links, devices or FIFOs") && said.contains("pg_snowflake.so"),
            "{said}"
        );
        assert_eq!(
            kept.inspect()["Layers"].as_array().unwrap().len(),
            1,
            "the image there is gone"
        );
    }
}
