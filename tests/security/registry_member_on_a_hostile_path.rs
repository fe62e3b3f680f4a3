//! Attacks on a registry member (issue 33) from the network path and through its connection
//! string: what the member writes to the server log, and what it hands to whoever answers.
//!
//! Runs alone (as tests/security/hostile_registry.rs): a fake registry on 127.0.0.1 per test.
//!
//! Majors: 15 17. As tests/security/hostile_registry.rs: the libpq of 15.20 and of 17.
#![cfg(not(feature = "pg_test"))]

use common::fake_registry::{grant, Answer, Auth, FakeRegistry, Reply};
use common::*;
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit as common;

/// A `NoticeResponse` with `text` as its message (libpq hands it to the connection's notice
/// processor, whose default prints it to stderr: in a server process, the server log).
fn notice(text: &str) -> Vec<u8> {
    let mut body = vec![];
    for (field, value) in [(b'S', "NOTICE"), (b'V', "NOTICE"), (b'C', "00000"), (b'M', text)] {
        body.push(field);
        body.extend_from_slice(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut m = vec![b'N'];
    m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    m.extend_from_slice(&body);
    m
}

/// Whoever answers the member's connection (anyone on the network path: libpq's default
/// `sslmode` is `prefer`) sends NoticeResponse messages before its answer. libpq prints each to
/// stderr, which is the server log: the text goes there whole, newlines included, outside
/// `log_min_messages` and with no prefix, so it can forge log lines and fill the log's disk at
/// the speed of the network. Measured: 2,000 notices of 30 kB wrote 60 MB of log in 8 s, with
/// 2,000 lines that read `2099-01-01 00:00:00 UTC [1] LOG:  FORGED ...`; a flood for 10 s wrote
/// 730 MB (every call lasts up to the query timeout of 15 s, and the next comes 2 s later).
/// Here 1,000 notices of 20 kB, then a correct grant.
#[test]
fn notices_from_whoever_answers_are_not_written_to_the_server_log() {
    const FORGED: &str = "2099-01-01 00:00:00 UTC [1] LOG:  FORGED by the network";
    let answer: Answer = Arc::new(|r: &mut Reply| {
        let padding = "x".repeat(20_000);
        for i in 0..1000 {
            r.send(&notice(&format!("notice {i}\n{FORGED} {padding}")))?;
        }
        let row = r.call.grant(7);
        r.rows(&[row])
    });
    let fake = FakeRegistry::start(answer);
    let m = fake.member("wire_notice", "");
    m.start();
    let before = std::fs::metadata(m.log_path()).unwrap().len();
    fake.wait_for("answers", 1, Duration::from_secs(60), FakeRegistry::answers_ended);
    std::thread::sleep(Duration::from_secs(1));
    let grown = std::fs::metadata(m.log_path()).unwrap().len() - before;
    let log = m.log();
    let forged = log.lines().filter(|l| l.starts_with(FORGED)).count();
    eprintln!("the log grew by {grown} bytes, with {forged} forged lines");
    m.stop("fast");
    assert_eq!(
        forged, 0,
        "{forged} lines of the server log were written by whoever answered the member"
    );
    assert!(grown < 1 << 20, "the server log grew by {grown} bytes of what whoever answered sent");
}

/// Whoever answers asks for the password in clear text, and the member's libpq sends it
/// (`sslmode=prefer` went on without TLS, and nothing restricts the authentication method):
/// the fleet role's password, from the connection string or the password file that
/// docs/many-servers.md recommends, goes to anyone on the network path, who can then lease,
/// hold or exhaust the fleet's worker ids at the real registry. (tests/security/hostile_registry.rs
/// checks that the password reaches such a fake, as a fact.) libpq 16's `require_auth`, or a
/// default `sslmode` that authenticates the server, would refuse; the libpq this member loads
/// here is the system's (15).
#[test]
fn the_password_is_not_sent_in_clear_text_to_whoever_answers() {
    const SECRET: &str = "S3cretPW";
    let fake = FakeRegistry::start(grant(7));
    fake.set_auth(Auth::CleartextThenRefuse("password authentication failed for user \"fleet\""));
    let m = fake.member("wire_cleartext", &format!("password={SECRET}"));
    m.start();
    fake.wait_for("startups", 1, Duration::from_secs(60), FakeRegistry::startups);
    let mut c = m.connect_ext();
    let mut libpq = String::new();
    poll(Duration::from_secs(30), Duration::from_millis(50), || {
        libpq = registry_stats(&mut c)["libpq"].as_str().unwrap_or_default().to_string();
        (!libpq.is_empty()).then_some(()).ok_or("the worker has not loaded libpq yet".into())
    });
    drop(c);
    std::thread::sleep(Duration::from_millis(500));
    m.stop("fast");
    let major: u32 = libpq.split('.').next().unwrap().parse().unwrap();
    eprintln!("the member's libpq is {libpq}; passwords the fake got: {:?}", fake.passwords());
    if major >= 16 {
        // require_auth=!password, the member's default.
        assert_eq!(
            fake.passwords(),
            Vec::<String>::new(),
            "the member sent its registry password in clear text to whoever answered"
        );
        return;
    }
    // An older libpq cannot refuse: the member says so at start, with what to do, and what it
    // says to do works.
    let log = m.log();
    assert!(
        log.contains("cannot refuse to send the registry's password in clear text")
            && log.contains("sslmode=verify-full"),
        "no warning of libpq {libpq}'s cleartext passwords:\n{log}"
    );
    let fake = FakeRegistry::start(grant(7));
    fake.set_auth(Auth::CleartextThenRefuse("password authentication failed for user \"fleet\""));
    let m = fake.member("wire_cleartext_tls", &format!("password={SECRET} sslmode=require"));
    m.start();
    let mut c = m.connect_ext();
    wait_for_refusal(&mut c, "SSL", Duration::from_secs(30));
    drop(c);
    m.stop("fast");
    assert_eq!(
        fake.passwords(),
        Vec::<String>::new(),
        "with sslmode=require the member still sent its password to a server without TLS"
    );
    assert!(
        !m.log().contains("cannot refuse to send the registry's password in clear text"),
        "the member warned although its connection string requires TLS"
    );
}

/// libpq's errors for a URI it cannot parse quote a value, or the whole URI, and the member
/// logs them, and shows them in `snowflake_stats()` and in the refusal of every
/// `snowflake_next()` to superusers and members of pg_monitor, after `redact`, which masks
/// `password=` and a URI's `user:password@` only. Each of these passwords is shown in all three:
/// - a password with a `%` not followed by two hex digits (`Pa%ssw0rd`, as generated passwords
///   have): libpq says `invalid percent-encoded token: "Pa%ssw0rd"`, the value alone;
/// - `?sslpassword=` (the client key's passphrase) in a URI libpq quotes whole;
/// - `?pass%77ord=`, a percent-encoded keyword libpq decodes to `password`;
/// - a user info with a space in its password (`fleet:S3c ret@`), which ends the mask.
#[test]
fn passwords_that_libpq_quotes_are_masked() {
    let fake = FakeRegistry::start(grant(7));
    let m = fake.member("wire_redact", "");
    let cases = [
        ("snowflake.registry = 'postgresql://fleet:Pa%ssw0rd@127.0.0.1/registry'", "ssw0rd"),
        (
            "snowflake.registry = 'postgresql://fleet@[::1/registry?sslpassword=KeyPassphrase'",
            "KeyPassphrase",
        ),
        ("snowflake.registry = 'postgresql://fleet@[::1/registry?pass%77ord=S3cretPW'", "S3cretPW"),
        ("snowflake.registry = 'postgresql://fleet:S3c r3t@[::1'", "r3t"),
    ];
    let mut shown_in = vec![];
    for (setting, secret) in cases {
        m.append_conf(&[setting]);
        let mark = std::fs::metadata(m.log_path()).map_or(0, |m| m.len() as usize);
        m.start();
        let mut c = m.connect_ext();
        let started = Instant::now();
        let detail = loop {
            let ServerError { code, message, detail, .. } = next_error(&mut c);
            if detail.contains("not a valid connection string") || started.elapsed().as_secs() > 30
            {
                break format!("{code}: {message} ({detail})");
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let problem = registry_stats(&mut c)["problem"].to_string();
        let log = m.log()[mark..].to_string();
        drop(c);
        m.stop("fast");
        for (place, text) in [("error", &detail), ("stats", &problem), ("log", &log)] {
            if text.contains(secret) {
                shown_in.push(format!("{setting}: in the {place}: {}", excerpt(text, secret)));
            }
        }
    }
    assert!(shown_in.is_empty(), "passwords shown:\n{}", shown_in.join("\n"));
}

/// The line of `text` around `secret`.
fn excerpt(text: &str, secret: &str) -> String {
    text.lines().find(|l| l.contains(secret)).unwrap_or_default().chars().take(300).collect()
}

/// The registry named by a host name, and a DNS server that does not answer (anyone on the path
/// to it can drop its answers): libpq resolves the name inside `PQconnectStartParams`, with
/// glibc's blocking resolver (5 s a try, two tries, per name server), before the worker's wait
/// on its latch and socket begins. A fast stop waits for it: 10.1 s here, stopped as the first
/// query came (docs/many-servers.md: the registry "never delays a shutdown"; issue 33: a fast stop
/// within 2 s). Needs root: the member runs in a mount namespace of its own whose
/// /etc/resolv.conf names a name server on 127.0.0.2 that this test makes, which reads the
/// queries and answers none.
#[test]
fn a_name_server_that_does_not_answer_delays_no_fast_stop() {
    assert!(
        running_as_root(),
        "this test needs root, for a mount namespace and port 53 (make test runs as root)"
    );
    let dns = std::net::UdpSocket::bind(("127.0.0.2", 53)).expect("bind 127.0.0.2:53");
    dns.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let m = Cluster::init(
        "wire_dns",
        &[
            "snowflake.worker_id = -1",
            "snowflake.registry = 'host=registry.attack33.example port=5432 user=fleet \
             dbname=registry'",
            SHORTEST_LEASE,
        ],
    );
    let resolv = m.data().join("../resolv.conf");
    std::fs::write(&resolv, "nameserver 127.0.0.2\n").unwrap();
    let start = format!(
        "mount --bind {} /etc/resolv.conf && exec runuser -u postgres -- {} start -w -t 60 -D {} \
         -l {}",
        resolv.display(),
        m.bin("pg_ctl").display(),
        m.data().display(),
        m.log_path().display()
    );
    check(
        std::process::Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &start])
            .output()
            .unwrap(),
        "pg_ctl start in a mount namespace",
    );
    // The registry worker is resolving the name.
    let mut query = [0u8; 512];
    dns.recv_from(&mut query).expect("the member asked the name server");
    let t = Instant::now();
    m.stop("fast");
    let stop = t.elapsed();
    eprintln!("pg_ctl stop -m fast took {stop:?} while the name server did not answer");
    assert!(
        stop < Duration::from_secs(2),
        "pg_ctl stop -m fast took {stop:?} while the registry's name was being resolved"
    );
}

/// A registry's error is its own text, and a line break in it would start a line of the
/// registry's choosing in the member's log (the claims path made a Citus node's text printable
/// in 0.5.0; the registry's path did not). The member now logs it on one line.
#[test]
fn a_registrys_error_text_starts_no_line_of_its_own_in_the_members_log() {
    let fake = FakeRegistry::start(grant(7));
    fake.set_auth(Auth::Refuse("refused\nLOG:  forged by the registry"));
    logged_on_one_line(&fake, "wire_error_text");
}

/// Starts a member of `fake`, waits for its WARNING of the registry's text (which holds "forged
/// by the registry" after a line break), and checks that no line of the member's log starts
/// with the registry's words.
fn logged_on_one_line(fake: &FakeRegistry, name: &str) {
    let m = fake.member(name, "");
    m.start();
    poll(Duration::from_secs(30), Duration::from_millis(100), || {
        m.log()
            .lines()
            .find(|l| l.contains("WARNING:  pg_snowflake:") && l.contains("forged by the registry"))
            .map(|l| println!("{l}"))
            .ok_or("no warning of the registry's text yet".into())
    });
    m.stop("fast");
    let log = m.log();
    assert!(
        !log.lines().any(|l| l.starts_with("LOG:  forged by the registry")),
        "the registry started a line of its own in the member's log:\n{log}"
    );
}

/// What the registry answers goes into the member's messages too: a `layout` refusal names the
/// namespace's layout as the registry describes it. With a line break in it, that text would
/// start a line of the registry's choosing in the member's log (libpq's errors were put on one
/// line by libpq.rs; the registry's answers were not).
#[test]
fn a_line_break_in_the_registrys_answer_starts_no_line_of_its_own() {
    let answer: Answer = Arc::new(|r: &mut Reply| {
        let mut row = r.call.grant(7);
        row[1] = Some(b"layout".to_vec());
        row[6] = Some(b"odd\nLOG:  forged by the registry's answer".to_vec());
        r.rows(&[row])
    });
    let fake = FakeRegistry::start(answer);
    logged_on_one_line(&fake, "wire_answer_text");
}

/// A registry's error longer than the 511 bytes the member keeps was logged again at every
/// attempt in 0.6.0's review (the kept text never equalled the new one): a registry could fill
/// the member's log. Logged once while it repeats.
#[test]
fn a_long_error_from_the_registry_is_logged_once_while_it_repeats() {
    let fake = FakeRegistry::start(grant(7));
    let long: &'static str = format!("refused: {}", "é".repeat(450)).leak();
    fake.set_auth(Auth::Refuse(long));
    let m = fake.member("wire_long_error", "");
    m.start();
    poll(Duration::from_secs(60), Duration::from_millis(100), || {
        let seen = fake.startups();
        (seen >= 4).then_some(()).ok_or(format!("{seen} attempts of the member so far"))
    });
    m.stop("fast");
    let log = m.log();
    let warnings = log
        .lines()
        .filter(|l| l.contains("WARNING:  pg_snowflake:") && l.contains("refused: éé"))
        .count();
    assert_eq!(warnings, 1, "{} attempts, {warnings} warnings:\n{log}", fake.startups());
}

/// With a libpq older than 16, which cannot refuse to send a password in clear text, the member
/// warns once, after a connection in which the registry asked for a password, where someone
/// else could answer in its place: over TCP. Not where no password was asked (a role the
/// registry trusts), nor over a unix socket in a directory only the registry's user may enter
/// (0.5.0 warned at every start, a socket's too, and only `sslmode=require`, which libpq
/// ignores on a socket, silenced it). Each member still leases its worker id.
#[test]
fn the_clear_text_warning_is_given_only_where_a_password_was_asked_and_could_reach_another() {
    let hub = Cluster::init("cleartext_registry", &[]);
    let sockets = hub.dir.join("sockets");
    let made = std::process::Command::new("runuser")
        .args(["-u", "postgres", "--", "mkdir", "-m", "0700"])
        .arg(&sockets)
        .status()
        .unwrap();
    assert!(made.success());
    hub.append_conf(&[&format!("unix_socket_directories = '{}'", sockets.display())]);
    // The registry asks `fleet` for its password, on the socket and on TCP; `fleet_a` is
    // trusted.
    let hba = hub.data().join("pg_hba.conf");
    let rest = files::read_to_string(&hba).unwrap();
    files::write(
        &hba,
        format!("local all fleet scram-sha-256\nhost all fleet 127.0.0.1/32 scram-sha-256\n{rest}"),
    )
    .unwrap();
    hub.start();
    let mut c = hub.connect_ext();
    for role in ["fleet", "fleet_a"] {
        common::registry::grant_lease(&mut c, role);
    }
    c.batch_execute("ALTER ROLE fleet PASSWORD 'S3cretPW'").unwrap();
    let registry = |host: &str, role: &str| {
        let password = if role == "fleet" { "password=S3cretPW" } else { "" };
        format!(
            "snowflake.registry = 'host={host} port={} user={role} dbname=postgres {password}'",
            hub.port
        )
    };
    let members = [
        ("cleartext_socket", registry(&sockets.display().to_string(), "fleet"), false),
        ("cleartext_trusted", registry("127.0.0.1", "fleet_a"), false),
        ("cleartext_tcp", registry("127.0.0.1", "fleet"), true),
    ];
    for (name, setting, over_a_network) in members {
        let m = Cluster::start_new(name, &["snowflake.worker_id = -1", &setting, SHORTEST_LEASE]);
        let mut mc = m.connect_ext();
        let leased = common::registry::leased_worker_id(&m);
        let libpq = registry_stats(&mut mc)["libpq"].as_str().unwrap_or_default().to_string();
        let major: u32 = libpq.split('.').next().unwrap().parse().unwrap();
        // The worker warns right after the call that leased, before it waits: a stop (which
        // ends its wait) comes after the warning, if there is one.
        drop(mc);
        m.stop("fast");
        let warned =
            m.log().contains("cannot refuse to send the registry's password in clear text");
        println!("{name}: worker id {leased}, libpq {libpq}, warned: {warned}");
        assert_eq!(warned, over_a_network && major < 16, "{name}:\n{}", m.log());
    }
}
