//! faultfs: a FUSE file system for power-loss and disk-fault tests.
//!
//! It keeps its own "disk cache": every write is visible at once but lost at a power cut
//! (SIGKILL of this process) unless an fsync made it durable. See README.md.
//!
//! Modules, one concern each:
//! * `store`: the durable state in the backing directory;
//! * `overlay`: one file's unsynced data over its durable data;
//! * `state`: the volatile tree and the steps that make parts of it durable;
//! * `faults`: fault rules; `stats`: counters; `control`: the control socket;
//! * `fs`: the FUSE glue.

mod control;
mod faults;
mod fs;
mod holds;
mod overlay;
mod state;
mod stats;
mod store;

use std::ffi::{CString, OsString};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::exit;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use fuser::{Config, MountOption, Session, SessionACL, SessionUnmounter};

use crate::control::Control;
use crate::faults::Faults;
use crate::fs::FaultFs;
use crate::holds::Holds;
use crate::state::State;
use crate::stats::Stats;
use crate::store::{Kind, Meta, Store};

const USAGE: &str = "\
usage:
  faultfs --init <backing> [--owner UID:GID] [--mode OCTAL]
        create an empty store (root directory owned by UID:GID, default: the caller; mode default 755)
  faultfs --import <dir> <backing>
        create a store whose durable state is a copy of the directory tree <dir>
  faultfs <backing> <mountpoint> [--control <socket>] [--journal [--strict-dir PATH]...] [--threads N]
        serve the store's durable state at <mountpoint>; prints `ready` once mounted.
        SIGKILL is a power cut: only what was fsynced is in <backing> afterwards.
        --journal: model a journaling file system (ext4, xfs): any fsync or fsyncdir also
        makes every pending directory change durable. Default: only fsyncdir of a
        directory makes its entries durable.
        --strict-dir PATH (with --journal, repeatable): except in this directory (relative
        to the mount's root): its entries stay pending until it is fsynced itself.";

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let result = match args.first().and_then(|a| a.to_str()) {
        Some("--help" | "-h") => {
            println!("{USAGE}");
            return;
        }
        Some("--init") => init(&args[1..]),
        Some("--import") if args.len() == 3 => {
            store::import(Path::new(&args[1]), Path::new(&args[2]))
        }
        Some(a) if !a.starts_with("--") && args.len() >= 2 => serve(&args),
        _ => usage(),
    };
    if let Err(e) = result {
        eprintln!("faultfs: {e}");
        exit(1);
    }
}

fn usage() -> ! {
    eprintln!("{USAGE}");
    exit(2)
}

fn init(args: &[OsString]) -> io::Result<()> {
    let Some(backing) = args.first() else { usage() };
    // SAFETY: geteuid and getegid cannot fail.
    let (mut uid, mut gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mut perm = 0o755;
    let mut rest = args[1..].iter().map(|a| a.to_str().unwrap_or_else(|| usage()));
    while let Some(flag) = rest.next() {
        let value = rest.next().unwrap_or_else(|| usage());
        match flag {
            "--owner" => {
                let (u, g) = value.split_once(':').unwrap_or_else(|| usage());
                uid = u.parse().unwrap_or_else(|_| usage());
                gid = g.parse().unwrap_or_else(|_| usage());
            }
            "--mode" => perm = u32::from_str_radix(value, 8).unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    let t = SystemTime::now();
    let root =
        Meta { kind: Kind::Dir, perm: perm & 0o7777, uid, gid, atime: t, mtime: t, ctime: t };
    Store::init(Path::new(backing), root).map(|_| ())
}

fn serve(args: &[OsString]) -> io::Result<()> {
    let backing = PathBuf::from(&args[0]);
    let mountpoint = PathBuf::from(&args[1]);
    let mut control_path = None;
    let mut threads = 1;
    let mut journal = false;
    let mut strict = Vec::new();
    let mut rest = args[2..].iter();
    while let Some(flag) = rest.next() {
        if flag == "--journal" {
            journal = true;
            continue;
        }
        let value = rest.next().unwrap_or_else(|| usage());
        match flag.to_str() {
            Some("--control") => control_path = Some(PathBuf::from(value)),
            Some("--strict-dir") => strict.push(
                Path::new(value)
                    .components()
                    .filter_map(|c| match c {
                        std::path::Component::Normal(name) => Some(name.to_os_string()),
                        _ => None,
                    })
                    .collect(),
            ),
            Some("--threads") => {
                threads = value
                    .to_str()
                    .and_then(|v| v.parse().ok())
                    .filter(|n| *n > 0)
                    .unwrap_or_else(|| usage())
            }
            _ => usage(),
        }
    }

    let (store, ns) = Store::open(&backing)?;
    let state = Arc::new(Mutex::new(State::load(store, ns, journal, strict)?));
    let stats = Arc::new(Stats::default());
    let faults = Arc::new(Faults::new(stats.clone()));
    let holds = Arc::new(Holds::default());

    // Block the stop signals before any thread starts, so that every thread inherits the
    // mask and only the signal thread below receives them.
    let signals = stop_signals();
    // SAFETY: `signals` is an initialised signal set.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut()) };

    if let Some(path) = &control_path {
        Control {
            state: state.clone(),
            faults: faults.clone(),
            holds: holds.clone(),
            stats: stats.clone(),
        }
        .spawn(path)?;
    }

    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("faultfs".into()),
        MountOption::Subtype("faultfs".into()),
        // The kernel checks modes and owners, as on a real disk (PostgreSQL checks that
        // its data directory is 0700 and its own).
        MountOption::DefaultPermissions,
    ];
    // allow_other: the daemon runs as root, PostgreSQL as `postgres`.
    config.acl = SessionACL::All;
    config.n_threads = Some(threads);
    let fs = FaultFs { state, faults, holds, stats };
    let mut session = Session::new(fs, &mountpoint, &config).map_err(|e| {
        io::Error::new(e.kind(), format!("cannot mount {}: {e}", mountpoint.display()))
    })?;
    let unmounter = session.unmount_callable();
    let mp = mountpoint.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || stop_on_signal(signals, unmounter, &mp))?;

    println!("ready");
    io::stdout().flush()?;
    let result = session.run();
    if let Some(path) = &control_path {
        let _ = std::fs::remove_file(path);
    }
    result
}

fn stop_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset and sigaddset initialise and fill the set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// On SIGTERM, SIGINT or SIGHUP: unmount, which ends the session loop. Unsynced data is
/// lost as at a power cut: a clean stop makes nothing durable either. If the mount is
/// busy, detach it and exit at once (the kernel ends the connection with this process).
fn stop_on_signal(signals: libc::sigset_t, mut unmounter: SessionUnmounter, mountpoint: &Path) {
    let mut sig = 0;
    // SAFETY: the set is initialised and blocked in every thread.
    unsafe { libc::sigwait(&signals, &mut sig) };
    if let Err(e) = unmounter.unmount() {
        eprintln!("faultfs: unmount failed ({e}); detaching");
        if let Ok(c) = CString::new(mountpoint.as_os_str().as_bytes()) {
            // SAFETY: `c` is a valid C string.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
        exit(0);
    }
}
