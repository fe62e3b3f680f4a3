//! Every test process runs in a network namespace of its own, made before its first thread: the
//! servers it starts listen on the loopback device of that namespace, which no process outside
//! it can reach. A test cluster trusts every connection (`initdb -A trust`, as test clusters
//! do), and in 0.5.0 it listened on the machine's own 127.0.0.1: any local user connected as
//! superuser, ran `COPY ... TO PROGRAM` as the operating-system user `postgres`, and from there
//! planted links for root's harness to follow. Another user cannot enter a namespace it does not
//! own (`setns` needs privileges over it), so no password is needed either.
//!
//! As root the namespace is made directly; as another user, inside a user namespace that maps
//! that user to itself. Either way the test fails at once, saying why, when neither can be made:
//! it never runs on the shared network without a word.
//!
//! What must reach the world (a build that downloads crates, apt in a Debian root) runs through
//! `with_host_network`, in the namespace the process began in.

use std::os::fd::RawFd;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

/// The network namespace the process began in, open (-1: none kept).
static HOST_NETWORK: AtomicI32 = AtomicI32::new(-1);

/// Runs before `main`, while the process has one thread (a namespace is a thread's: made later,
/// it would hold one test's thread only). Linked into every binary that includes this file.
#[used]
#[link_section = ".init_array"]
static ENTER: extern "C" fn() = enter;

extern "C" fn enter() {
    if let Err(why) = enter_private_network() {
        eprintln!("tests: cannot give this test process a network namespace of its own: {why}");
        std::process::exit(2);
    }
}

fn enter_private_network() -> Result<(), String> {
    let os = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // SAFETY: a path and flags; the descriptor is kept for the life of the process.
    let host =
        unsafe { libc::open(c"/proc/self/ns/net".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if host < 0 {
        return Err(os("open /proc/self/ns/net"));
    }
    // SAFETY: plain system calls on this (single-threaded) process.
    let uid = unsafe { libc::getuid() };
    // SAFETY: as above.
    let gid = unsafe { libc::getgid() };
    // SAFETY: as above.
    if mutant!(private_network, { (unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0) }, { false })
    {
        if uid == 0 {
            return Err(os("unshare(CLONE_NEWNET)"));
        }
        // Not root: a user namespace in which this user is itself, and which owns the new
        // network namespace.
        // SAFETY: as above.
        if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } != 0 {
            return Err(os("unshare(CLONE_NEWUSER | CLONE_NEWNET)"));
        }
        let write = |path: &str, text: String| {
            std::fs::write(path, text).map_err(|e| format!("write {path}: {e}"))
        };
        write("/proc/self/setgroups", "deny".into())?;
        write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    }
    loopback_up()?;
    HOST_NETWORK.store(host, Ordering::Relaxed);
    Ok(())
}

/// Brings up `lo`, the one device of a new network namespace (down when made).
fn loopback_up() -> Result<(), String> {
    // SAFETY: a socket for the ioctls, closed below; `ifreq` is plain data, named "lo".
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(format!("socket: {}", std::io::Error::last_os_error()));
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo\0".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        let mut result = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req);
        if result == 0 {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            result = libc::ioctl(fd, libc::SIOCSIFFLAGS, &req);
        }
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if result != 0 {
            return Err(format!("bringing up lo: {err}"));
        }
    }
    Ok(())
}

/// Whether this process runs in a network namespace other than the one it began in.
pub fn is_private() -> bool {
    let here = std::fs::read_link("/proc/self/ns/net").ok();
    let host = HOST_NETWORK.load(Ordering::Relaxed);
    let began = (host >= 0).then(|| std::fs::read_link(format!("/proc/self/fd/{host}")).ok());
    matches!((here, began), (Some(here), Some(Some(began))) if here != began)
}

/// `cmd` runs in the network namespace the process began in: for what must reach the world,
/// never for a server.
pub fn with_host_network(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    let host: RawFd = HOST_NETWORK.load(Ordering::Relaxed);
    if host >= 0 {
        // SAFETY: setns is async-signal-safe, and the descriptor stays open until exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(host, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd
}
