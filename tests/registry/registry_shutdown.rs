//! A registry member's shutdown (src/coordination/registry/worker.rs) against registries that never answer:
//! its worker waits for the registry's socket and its own latch together, so a fast stop returns
//! within 2 s. Apart from tests/registry/registry.rs, so that it can run alone.
//!
//! Runs alone (scripts/test-suites.py): a stop must return within 2 s, shutdown checkpoint
//! included, which other suites' fsyncs on a loaded machine would not promise.
#![cfg(not(feature = "pg_test"))]

use common::registry::member_in;
use common::*;
use std::time::Duration;
use testkit as common;

/// A listener of the test's own on a free port that answers nothing at all: its accept queue
/// (backlog 0) is full with one connection of its own, so the kernel drops every SYN and a
/// connect hangs until its timeout. Returns the port and what keeps it so.
fn listener_that_answers_nothing() -> (u16, (std::os::fd::OwnedFd, std::net::TcpStream)) {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket calls on a socket this function owns (closed with the OwnedFd).
    let (fd, port) = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        let size = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(libc::bind(fd, (&raw const addr).cast(), size), 0);
        assert_eq!(libc::listen(fd, 0), 0);
        let mut len = size;
        assert_eq!(libc::getsockname(fd, (&raw mut addr).cast(), &mut len), 0);
        (std::os::fd::OwnedFd::from_raw_fd(fd), u16::from_be(addr.sin_port))
    };
    let filler = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    (port, (fd, filler))
}

/// Whether a process connects to `port` and waits for the SYN's answer (SYN_SENT in
/// /proc/net/tcp: state 02, the remote port in hex).
fn someone_waits_to_connect_to(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(3) == Some(&"02")
            && fields
                .get(2)
                .and_then(|remote| remote.split(':').nth(1))
                .is_some_and(|p| u16::from_str_radix(p, 16) == Ok(port))
    })
}

/// A member's shutdown never waits for the registry: its worker waits for the registry's socket
/// and its own latch together (asynchronous libpq, as PostgreSQL's walreceiver), so `pg_ctl stop
/// -m fast` returns within 2 s while the registry accepts connections and never answers, and
/// while it answers nothing at all. 0.3.0's blocking libpq held the stop until its timeouts ran
/// out (3.1 s measured against the first; 5 s of connect_timeout allowed).
#[test]
fn a_member_stops_at_once_while_its_registry_is_silent() {
    let mut stops = vec![];
    // Accepts, and never says a word.
    let port = free_port();
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let accepted = std::sync::Arc::new(std::sync::Mutex::new(vec![]));
    let keep = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            keep.lock().unwrap().push(stream);
        }
    });
    let m = member_in("reg_silent_accepts", port, "fleet", "postgres", &[]);
    m.start();
    poll(Duration::from_secs(20), Duration::from_millis(10), || {
        (!accepted.lock().unwrap().is_empty())
            .then_some(())
            .ok_or("the registry's worker did not connect".into())
    });
    let t = std::time::Instant::now();
    m.stop("fast");
    stops.push(("accepts and never answers", t.elapsed()));

    // Answers nothing at all: the worker waits for its SYN's answer.
    let (port, _keep) = listener_that_answers_nothing();
    let n = member_in("reg_silent_nothing", port, "fleet", "postgres", &[]);
    n.start();
    poll(Duration::from_secs(20), Duration::from_millis(10), || {
        someone_waits_to_connect_to(port)
            .then_some(())
            .ok_or("the registry's worker is not connecting".into())
    });
    let t = std::time::Instant::now();
    n.stop("fast");
    stops.push(("answers nothing at all", t.elapsed()));
    eprintln!("pg_ctl stop -m fast took {stops:?}");
    for (registry, took) in stops {
        assert!(
            took < Duration::from_secs(2),
            "a registry that {registry} held the member's stop for {took:?}"
        );
    }
}
