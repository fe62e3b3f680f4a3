//! A registry member (a real server with `snowflake.registry` set and `snowflake.worker_id =
//! -1`) distrusts its registry's answers (src/coordination/registry/libpq.rs, src/coordination/registry/worker.rs). A fake
//! registry (tests/common/fake_registry.rs) speaks the wire protocol to the member's real libpq
//! and answers the lease statement with COPY, garbage, huge rows, a trickle, more rows or
//! columns than a lease has, an oversized value, or a grant no id fits in. In every case the
//! member refuses the lease (`snowflake_next()` fails with 55000, `snowflake_stats()` says why),
//! makes no id, caches nothing, keeps its registry worker's memory bounded and stops within 2 s.
//! 0.4.0 spun at 100% CPU on COPY (a fast stop never ended), grew to 1.5 GB on 1 MB rows, and
//! cached a grant to start above 2^63 - 1 ms. Passwords never reach the log, an error or the
//! stats.
//!
//! Runs alone (scripts/test-suites.py): a stop must return within 2 s, shutdown checkpoint
//! included, as in tests/registry/registry_shutdown.rs.
//!
//! Majors: 15 17. What the member makes of an answer is the same code on every major (every
//! major runs the registry's own suites, tests/registry); the libpq the server loads is what
//! differs: 15.20's (which cannot refuse to send a password in clear text) on 15, 17's own (which
//! refuses) on 17.
#![cfg(not(feature = "pg_test"))]

use common::fake_registry::{grant, msg, Answer, Auth, FakeRegistry, Reply, LEASE_COLUMNS, TEXT};
use common::*;
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit as common;

/// The lease cache a grant is written to before it is used (src/coordination/registry/cache.rs).
const CACHE: &str = "pg_snowflake.registry";
/// The registry worker's title, in its /proc/PID/cmdline.
const WORKER: &str = "pg_snowflake registry";
/// How much memory libpq may take in the worker beyond its data segment at start (RLIMIT_DATA,
/// src/coordination/registry/libpq.rs `MEMORY_HEADROOM`): 64 MB.
const HEADROOM_KB: u64 = 64 * 1024;
/// Resident memory the worker may add outside libpq's bound: the code and data pages of the
/// refusal path (a WARNING, an error string) and libpq's first buffers, 16 kB each; 16 MB is
/// well above that and far below what an unbounded answer takes (a 1 GB row: 1 GB or more).
const SLACK_KB: u64 = 16 * 1024;
/// A fast stop while the registry misbehaves, shutdown checkpoint included (0.4.0: never, on
/// COPY).
const STOP_WITHIN: Duration = Duration::from_secs(2);
/// The first refusal comes after at most the member's query timeout (15 s, reached only by the
/// trickle) plus its connect timeout (5 s) and a retry (2 s); 60 s leaves room for a loaded
/// machine.
const REFUSED_WITHIN: Duration = Duration::from_secs(60);

/// What a member made of one hostile answer.
struct Outcome {
    /// The refusal's detail, as `snowflake_next()` gave it.
    detail: String,
    /// From the member's start to the first refusal seen.
    refused_after: Duration,
    /// The worker's resident memory (kB) when the first lease statement came, and its peak.
    rss_before_kb: u64,
    peak_kb: u64,
    /// Bytes of the last hostile answer the fake had sent when the member was stopped.
    answer_bytes: u64,
    stop: Duration,
}

/// Polls until `snowflake_next()` fails with 55000 and `part` in its detail; any id made
/// meanwhile fails the test at once. Returns the detail and the hint.
fn refused_without_an_id(c: &mut Client, part: &str, within: Duration) -> (String, String) {
    let mut seen = (String::new(), String::new());
    poll(within, Duration::from_millis(50), || match c.query_one("SELECT snowflake_next()", &[]) {
        Ok(row) => {
            panic!("the member made id {} from a hostile registry's answer", row.get::<_, i64>(0))
        }
        Err(e) => {
            let db = e.as_db_error().ok_or(format!("{e}"))?;
            let (code, d) = (db.code().code(), db.detail().unwrap_or_default());
            if code == "55000" && d.contains(part) {
                seen = (d.to_string(), db.hint().unwrap_or_default().to_string());
                Ok(())
            } else {
                Err(format!("{code}: {} ({d})", db.message()))
            }
        }
    });
    seen
}

/// How a member names what it refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Said {
    /// An answer no registry gives, whoever gave it: the hint says to check what
    /// snowflake.registry names and to set sslmode=verify-full, never that the registry is out
    /// of reach.
    NoRegistryAnswers,
    /// The connection broke (libpq lost the protocol, or the answer did not come in time).
    Unreachable,
}

/// Runs a new member against a fake registry that answers every lease statement with `answer`,
/// and checks what every hostile answer must give: a refusal of ids naming `part`, the same
/// problem in `snowflake_stats()` and once in the log, no id, no cached lease, the worker's
/// memory within libpq's bound, and a fast stop within 2 s while the registry goes on.
fn refused(name: &str, answer: Answer, part: &str, said: Said) -> Outcome {
    let fake = FakeRegistry::start(answer);
    // The first lease statement waits until the worker's memory before any answer is known.
    fake.hold();
    let m = fake.member(name, "");
    let started = Instant::now();
    m.start();
    fake.wait_for("lease statements", 1, REFUSED_WITHIN, FakeRegistry::lease_statements);
    let worker = m.process_titled(WORKER).expect("the registry worker runs");
    let rss_before_kb = proc_status_kb(worker, "VmHWM").unwrap();
    let bounded = |when: &str| {
        let peak_kb = proc_status_kb(worker, "VmHWM").expect("the registry worker runs");
        assert!(
            peak_kb < rss_before_kb + HEADROOM_KB + SLACK_KB,
            "{when}, the registry worker's peak resident memory grew from {rss_before_kb} kB to \
             {peak_kb} kB, past libpq's bound of {HEADROOM_KB} kB (+ {SLACK_KB} kB)"
        );
        peak_kb
    };
    fake.release();
    // Memory first: an answer that got past the bound shows it here, whatever the refusal said.
    fake.wait_for(
        "hostile answers over (whole, or the member hung up)",
        1,
        REFUSED_WITHIN,
        FakeRegistry::answers_ended,
    );
    bounded("after the first answer");

    let mut c = m.connect_ext();
    let (detail, hint) = refused_without_an_id(&mut c, part, REFUSED_WITHIN);
    let refused_after = started.elapsed();
    match said {
        Said::NoRegistryAnswers => assert!(
            !detail.contains("unreachable") && hint.contains("sslmode=verify-full"),
            "{detail} ({hint})"
        ),
        Said::Unreachable => assert!(detail.contains("unreachable"), "{detail}"),
    }
    let registry = registry_stats(&mut c);
    assert_eq!(registry["source"], "none", "{registry}");
    let s = stats(&mut c);
    assert!(s["worker_id"].is_null(), "{s}");
    let problem = registry["problem"].as_str().unwrap_or_default().to_string();
    assert!(problem.contains(part), "{registry}");

    // The worker comes back (every 2 s) and is refused again, in the same words: it neither
    // gave up nor died. Then the member is stopped while that answer is under way.
    let begun = fake.answers_begun();
    fake.wait_for("hostile answers begun", begun + 1, REFUSED_WITHIN, FakeRegistry::answers_begun);
    refused_without_an_id(&mut c, part, REFUSED_WITHIN);
    assert_eq!(
        m.process_titled(WORKER),
        Some(worker),
        "the registry worker was restarted: it died\n{}",
        m.log()
    );
    assert!(!m.data().join(CACHE).exists(), "a hostile answer was cached as a lease");
    let s = stats(&mut c);
    assert_eq!(s["ids_since_start"], 0, "{s}");
    let peak_kb = bounded("after the second answer");
    let warnings = m
        .log()
        .lines()
        .filter(|l| l.contains("WARNING:  pg_snowflake: ") && l.contains(part))
        .count();
    assert_eq!(warnings, 1, "a problem is logged once\n{}", m.log());
    drop(c);
    let answer_bytes = fake.answer_bytes();
    let t = Instant::now();
    m.stop("fast");
    let stop = t.elapsed();
    let outcome = Outcome { detail, refused_after, rss_before_kb, peak_kb, answer_bytes, stop };
    eprintln!(
        "{name}: refused after {:.1} s: \"{}\"; worker VmHWM {} kB (before the answer {} kB); \
         last answer {} bytes sent; pg_ctl stop -m fast {:.3} s",
        outcome.refused_after.as_secs_f64(),
        outcome.detail,
        outcome.peak_kb,
        outcome.rss_before_kb,
        outcome.answer_bytes,
        outcome.stop.as_secs_f64()
    );
    assert!(stop < STOP_WITHIN, "pg_ctl stop -m fast took {stop:?} while the registry answered so");
    assert!(!m.data().join(CACHE).exists(), "a hostile answer was cached as a lease");
    outcome
}

/// A correct grant of worker id 7 with `change` applied to its seven values.
fn altered(change: impl Fn(&mut Vec<Option<Vec<u8>>>) + Send + Sync + 'static) -> Answer {
    Arc::new(move |r: &mut Reply| {
        let mut row = r.call.grant(7);
        change(&mut row);
        r.rows(&[row])
    })
}

/// `CopyOutResponse` (`H`) or `CopyInResponse` (`G`) of seven columns in place of the lease's
/// rows, then nothing until the member hangs up.
fn copy(kind: u8) -> Answer {
    Arc::new(move |r: &mut Reply| {
        r.begin()?;
        r.send(&msg::copy_response(kind, 7))?;
        r.until_hangup()
    })
}

/// COPY OUT in place of the lease's rows: libpq in the COPY state hands out the same result
/// forever, and 0.4.0's worker asked for the next one at 100% CPU, past a fast stop.
#[test]
fn copy_out_is_refused() {
    let o = refused("hreg_copy_out", copy(b'H'), "answered with COPY", Said::NoRegistryAnswers);
    assert!(o.detail.contains("which no registry statement makes"));
}

/// COPY IN, likewise.
#[test]
fn copy_in_is_refused() {
    refused("hreg_copy_in", copy(b'G'), "answered with COPY", Said::NoRegistryAnswers);
}

/// 4 kB of seeded noise in place of the lease's rows: libpq loses its footing in the protocol
/// and drops the connection; the worker sees a broken call, not a lease.
#[test]
fn garbage_is_refused() {
    let answer: Answer = Arc::new(|r: &mut Reply| {
        r.begin()?;
        let mut rng = Rng(0x0005_eed0_f9a7_ba9e);
        let noise: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
        r.send(&noise)?;
        r.until_hangup()
    });
    refused("hreg_garbage", answer, "lost synchronization with server", Said::Unreachable);
}

/// Rows of 1 MB each, as fast as the socket takes them, up to 2 GB: the member reads one row at
/// a time (libpq's single-row mode) and refuses the first, whose last value is 2048 times what
/// a lease's longest value may be (512 bytes). 0.4.0 gathered them all until its 15 s query
/// timeout: 1.5 GB.
#[test]
fn rows_of_a_megabyte_are_refused_at_the_first() {
    let answer: Answer = Arc::new(|r: &mut Reply| {
        r.begin()?;
        r.send(&msg::row_description(&LEASE_COLUMNS))?;
        let mut row = r.call.grant(7);
        row[6] = Some(vec![b'x'; 1 << 20]);
        let row = msg::data_row(&row);
        for _ in 0..2048 {
            r.send(&row)?;
        }
        Ok(())
    });
    let o = refused(
        "hreg_mb_rows",
        answer,
        "answered with a value of 1048576 bytes",
        Said::NoRegistryAnswers,
    );
    // The member hung up after its first row (the socket's buffers hold a few more).
    assert!(
        o.answer_bytes < 64 << 20,
        "the member took {} bytes before it hung up",
        o.answer_bytes
    );
}

/// One DataRow that announces 1 GiB, then streams it: libpq must hold a message whole before it
/// parses it, and asks for a 1 GiB buffer at once. Under the worker's data limit (64 MB above
/// what it had at start) that allocation fails cleanly, and libpq drops the connection.
#[test]
fn a_row_announcing_a_gigabyte_is_refused_within_the_memory_bound() {
    let answer: Answer = Arc::new(|r: &mut Reply| {
        r.begin()?;
        r.send(&msg::row_description(&LEASE_COLUMNS))?;
        let row = r.call.grant(7);
        let total: u32 = 1 << 30;
        let mut head = vec![b'D'];
        head.extend_from_slice(&total.to_be_bytes());
        head.extend_from_slice(&7u16.to_be_bytes());
        for value in &row[..6] {
            let v = value.as_ref().unwrap();
            head.extend_from_slice(&(v.len() as u32).to_be_bytes());
            head.extend_from_slice(v);
        }
        // The last value fills the message up to its announced length (the type byte is not
        // counted).
        let last = total as usize - (head.len() - 1) - 4;
        head.extend_from_slice(&(last as u32).to_be_bytes());
        r.send(&head)?;
        let chunk = vec![b'x'; 1 << 20];
        let mut left = last;
        while left > 0 {
            let n = left.min(chunk.len());
            r.send(&chunk[..n])?;
            left -= n;
        }
        Ok(())
    });
    let o = refused(
        "hreg_gb_row",
        answer,
        "cannot allocate memory for input buffer",
        Said::Unreachable,
    );
    assert!(
        o.answer_bytes < 64 << 20,
        "the member read {} bytes of a row it could not hold",
        o.answer_bytes
    );
}

/// A correct grant, one byte every 2 seconds (about 10 minutes for the whole answer): the
/// member waits for it on its socket and latch until its query timeout (15 s), then refuses;
/// a fast stop in the middle of the trickle ends the wait at once.
#[test]
fn a_trickle_of_one_byte_every_two_seconds_is_refused_at_the_query_timeout() {
    let answer: Answer = Arc::new(|r: &mut Reply| {
        let mut whole = msg::parse_complete();
        whole.extend(msg::bind_complete());
        whole.extend(msg::row_description(&LEASE_COLUMNS));
        whole.extend(msg::data_row(&r.call.grant(7)));
        whole.extend(msg::command_complete("SELECT 1"));
        whole.extend(msg::ready_for_query());
        for byte in whole {
            r.send(&[byte])?;
            r.pause(Duration::from_secs(2))?;
        }
        Ok(())
    });
    let o = refused(
        "hreg_trickle",
        answer,
        "timeout while waiting for the registry's answer",
        Said::Unreachable,
    );
    // Refused at the 15 s query timeout, not before: the trickle was waited for.
    assert!(o.refused_after >= Duration::from_secs(15), "{:?}", o.refused_after);
}

/// Two rows, each a correct grant: a lease is one row, and the second is refused.
#[test]
fn two_rows_are_refused() {
    let answer: Answer = Arc::new(|r: &mut Reply| {
        let row = r.call.grant(7);
        r.rows(&[row.clone(), row])
    });
    refused("hreg_two_rows", answer, "answered with more than 1 rows", Said::NoRegistryAnswers);
}

/// A correct grant with a ninth column.
#[test]
fn nine_columns_are_refused() {
    let answer: Answer = Arc::new(|r: &mut Reply| {
        r.begin()?;
        let mut columns = LEASE_COLUMNS.to_vec();
        columns.push(("extra", TEXT));
        let mut row = r.call.grant(7);
        row.push(Some(b"x".to_vec()));
        let mut m = msg::row_description(&columns);
        m.extend(msg::data_row(&row));
        m.extend(msg::command_complete("SELECT 1"));
        m.extend(msg::ready_for_query());
        r.send(&m)
    });
    refused(
        "hreg_nine_columns",
        answer,
        "answered with 1 rows of 9 columns, where 1 of 8 were expected",
        Said::NoRegistryAnswers,
    );
}

/// A correct grant whose namespace_layout (a value a grant does not even use) is 100 kB.
#[test]
fn a_value_of_100_kb_is_refused() {
    refused(
        "hreg_100kb",
        altered(|row| row[6] = Some(vec![b'x'; 100 * 1024])),
        "answered with a value of 102400 bytes",
        Said::NoRegistryAnswers,
    );
}

/// A grant to start above 2^63 - 1 ms: no id fits in the lease. 0.4.0 cached it, kept it across
/// restarts, and every id failed as past the layout's end (2200H).
#[test]
fn a_grant_to_start_above_the_largest_bigint_is_refused() {
    refused(
        "hreg_start_above",
        altered(|row| row[4] = Some(i64::MAX.to_string().into_bytes())),
        "to start above 9223372036854775807 ms after 1970, at or past the end of the lease",
        Said::NoRegistryAnswers,
    );
}

/// Worker id 1024, one past Twitter's 10 worker bits: it would spill into the time bits.
#[test]
fn a_worker_id_outside_the_layout_is_refused() {
    refused(
        "hreg_worker_id",
        altered(|row| row[2] = Some(b"1024".to_vec())),
        "answered with worker id 1024, which this server did not ask for",
        Said::NoRegistryAnswers,
    );
}

/// The fake itself, proven: answered correctly, it is a registry. The member leases worker id
/// 7 through it (what it asked for is what a member asks: its namespace, layout, a 10 s lease
/// ending 10 s from now), caches the grant, makes ids of worker id 7 and renews. A hostile
/// renewal then changes nothing: the lease in force goes on and its cache stays as it was;
/// a correct answer afterwards renews again. A fast stop takes under 2 s here too.
#[test]
fn a_correct_answer_through_the_fake_is_a_lease_and_a_hostile_renewal_changes_nothing() {
    let fake = FakeRegistry::start(grant(7));
    let m = fake.member("hreg_granted", "");
    m.start();
    let mut c = m.connect_ext();
    let id = first_id(&mut c, REFUSED_WITHIN);
    assert_eq!(worker_id_of(&mut c, id), 7);
    let registry = registry_stats(&mut c);
    assert_eq!(registry["source"], "leased", "{registry}");
    assert_eq!(stats(&mut c)["worker_id"], 7);
    let cached = files::read_to_string(&m.data().join(CACHE)).expect("the grant is cached");
    assert!(cached.contains("worker_id=7\n"), "{cached}");

    let calls = fake.calls();
    let call = &calls[0];
    assert_eq!(call.namespace(), Some("default"));
    assert_eq!(call.layout(), Some("twitter"));
    assert_eq!(call.wanted(), None);
    assert_eq!(call.lease_ms(), 10_000);
    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as i64;
    assert!(
        (now_ms..now_ms + 10_000).contains(&call.covered_until_ms()),
        "covered_until_ms {} is not within the 10 s from now",
        call.covered_until_ms()
    );
    let startup = fake.startup_params();
    for (key, value) in
        [("user", "fleet"), ("database", "registry"), ("application_name", "pg_snowflake registry")]
    {
        assert!(
            startup.iter().any(|(k, v)| k == key && v == value),
            "{key}={value} not in {startup:?}"
        );
    }
    // Renewed every third of the lease (3.3 s), asking for the worker id it holds.
    fake.wait_for("lease statements", 2, Duration::from_secs(20), FakeRegistry::lease_statements);
    poll(Duration::from_secs(10), Duration::from_millis(50), || {
        let cached_now = files::read_to_string(&m.data().join(CACHE)).unwrap();
        (cached_now != cached).then_some(()).ok_or("the renewal did not rewrite the cache".into())
    });
    assert_eq!(fake.calls()[1].wanted(), Some(7));

    // A renewal answered with a grant no id fits in: refused, the lease in force goes on.
    fake.set_answer(altered(|row| row[4] = Some(i64::MAX.to_string().into_bytes())));
    poll(Duration::from_secs(20), Duration::from_millis(50), || {
        let registry = registry_stats(&mut c);
        registry["problem"]
            .as_str()
            .is_some_and(|p| p.contains("at or past the end of the lease"))
            .then_some(())
            .ok_or(format!("no refused renewal yet: {registry}"))
    });
    let before = files::read_to_string(&m.data().join(CACHE)).unwrap();
    let id = ids(&mut c, "SELECT snowflake_next()")[0];
    assert_eq!(worker_id_of(&mut c, id), 7);
    let statements = fake.lease_statements();
    fake.wait_for(
        "lease statements",
        statements + 1,
        Duration::from_secs(20),
        FakeRegistry::lease_statements,
    );
    assert_eq!(
        files::read_to_string(&m.data().join(CACHE)).unwrap(),
        before,
        "a refused renewal changed the cached lease"
    );

    // Answered correctly again: renewed, the problem gone.
    fake.set_answer(grant(7));
    poll(Duration::from_secs(20), Duration::from_millis(50), || {
        let registry = registry_stats(&mut c);
        (registry["problem"].is_null() && registry["source"] == "leased")
            .then_some(())
            .ok_or(format!("not renewed yet: {registry}"))
    });
    let id = first_id(&mut c, Duration::from_secs(10));
    assert_eq!(worker_id_of(&mut c, id), 7);
    assert_ne!(files::read_to_string(&m.data().join(CACHE)).unwrap(), before);
    drop(c);
    let t = Instant::now();
    m.stop("fast");
    let stop = t.elapsed();
    eprintln!("granted: pg_ctl stop -m fast {:.3} s", stop.as_secs_f64());
    assert!(stop < STOP_WITHIN, "pg_ctl stop -m fast took {stop:?}");
}

/// Passwords in `snowflake.registry` never reach the server log, the error of
/// `snowflake_next()` or `snowflake_stats()`; `********` stands in their place. Three ways a
/// password gets near a problem: a URI with a typo (libpq quotes the whole string in its
/// error; 0.4.0 logged it as it was), an invalid URI with the password as a query parameter,
/// and a keyword string whose registry quotes the connection string back in its refusal (a
/// hostile registry, or a pooler in front of one, says what it likes). (Whether the member sends
/// the password to a registry that asks for it in clear text is tests/security/registry_member_on_a_hostile_path.rs's.)
#[test]
fn passwords_are_masked_in_the_log_the_error_and_the_stats() {
    const SECRET: &str = "S3cretPW";
    let fake = FakeRegistry::start(grant(7));
    fake.set_auth(Auth::Refuse(
        "password authentication failed for \"host=127.0.0.1 user=fleet password=S3cretPW\"",
    ));
    let m = fake.member("hreg_password", "");
    let settings = [
        (
            "snowflake.registry = 'postgresql://fleet:S3cretPW@[::1'".to_string(),
            "postgresql://fleet:********@[::1",
        ),
        (
            "snowflake.registry = 'postgresql://fleet@[::1/registry?password=S3cretPW'".to_string(),
            "?password=********",
        ),
        (fake.conninfo_setting("password=S3cretPW"), "password=********"),
    ];
    for (setting, masked) in &settings {
        m.append_conf(&[setting]);
        m.start();
        let mut c = m.connect_ext();
        let (detail, _) = refused_without_an_id(&mut c, masked, REFUSED_WITHIN);
        let ServerError { code, message, .. } = next_error(&mut c);
        assert_eq!(code, "55000");
        eprintln!("{setting}: {message} ({detail})");
        let shown = format!("{message} {detail} {}", stats(&mut c));
        assert!(shown.contains(masked), "{shown}");
        assert!(!shown.contains(SECRET), "{setting}: the password is shown: {shown}");
        poll(Duration::from_secs(10), Duration::from_millis(50), || {
            m.log()
                .lines()
                .any(|l| l.contains("WARNING:  pg_snowflake: ") && l.contains(masked))
                .then_some(())
                .ok_or(format!("{setting}: no WARNING with {masked} in the log"))
        });
        drop(c);
        m.stop("fast");
    }
    let log = m.log();
    assert!(!log.contains(SECRET), "the password is in the server log:\n{log}");
    assert!(log.contains("********"), "{log}");
}
