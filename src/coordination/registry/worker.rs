//! The registry's background worker: leases this server's worker id, renews it every third of
//! `snowflake.registry_lease`, caches every grant durably, and only then lets the generator use
//! it. It runs on a primary only (a standby starts it when promoted) and holds no lock while it
//! talks to the registry, so a slow or unreachable registry never blocks `snowflake_next()`:
//! ids go on under the lease in force until it runs out.

use super::{cache, libpq, node_name, system_identifier, Problem, Registry, Source};
use crate::background::{self, Reaches};
use crate::errors::{self, Code};
use crate::layout::Order;
use crate::text::printable;
use crate::{clock, generator, gucs, identity};
use pgrx::prelude::*;
use std::ffi::CStr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// After a failed call, the next try comes this soon (or at a third of the lease, if sooner).
const RETRY: Duration = Duration::from_secs(2);

/// What the connection gets unless `snowflake.registry` says otherwise. The worker waits for the
/// registry on its latch and its socket (`wait`): a shutdown ends any wait at once. A registry
/// that does not answer costs a call at most `connect_timeout` to connect and `QUERY_TIMEOUT`
/// for each statement; keepalives and `tcp_user_timeout` find a dead registry between calls.
const CONNECTION_DEFAULTS: [(&str, &str); 7] = [
    ("connect_timeout", "5"),
    ("application_name", "pg_snowflake registry"),
    ("keepalives", "1"),
    ("keepalives_idle", "5"),
    ("keepalives_interval", "2"),
    ("keepalives_count", "3"),
    ("tcp_user_timeout", "10000"),
];

/// Every default of the connection: `CONNECTION_DEFAULTS`, and with libpq 16 or later
/// `require_auth=!password`: whoever answers in the registry's place (libpq's default `sslmode`
/// is `prefer`, which takes a server that does not offer TLS) could otherwise ask for the
/// password in clear text, and libpq would send it (seen against a fake registry). md5 and SCRAM
/// still work, and so does trust. A `require_auth` in `snowflake.registry` wins. Older libpq
/// cannot refuse: `warn_of_cleartext` says so.
fn connection_defaults() -> Vec<(&'static str, &'static str)> {
    let mut defaults = CONNECTION_DEFAULTS.to_vec();
    if libpq::version() >= 160000 {
        mutant!(
            registry_require_auth,
            {
                defaults.push(("require_auth", "!password"));
            },
            {}
        );
    }
    defaults
}

/// With a libpq older than 16 (Debian 12's is 15), which cannot refuse to send a password in
/// clear text: a WARNING, once, after the first connection attempt in which the registry (or
/// whoever answered in its place) asked for a password, where someone else could answer in its
/// place. Not where no password is asked (the fleet authenticates without one), where libpq
/// authenticates the server (`sslmode` verify-ca or verify-full), nor over a unix socket in a
/// directory no other user may write or with `requirepeer` (0.5.0 warned at every start, even
/// over a socket, and only `sslmode=require`, which libpq ignores on a socket, silenced it).
fn warn_of_cleartext(conninfo: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    let version = libpq::version();
    let Some(attempt) = libpq::last_attempt() else { return };
    mutant!(registry_cleartext_warning, {}, { return });
    if WARNED.load(Ordering::Relaxed)
        || version == 0
        || version >= 160000
        || !attempt.password_asked
        || private_socket(&attempt.host, conninfo)
        || (!is_socket(&attempt.host) && libpq::authenticates_server(conninfo))
    {
        return;
    }
    WARNED.store(true, Ordering::Relaxed);
    let (detail, hint) = if is_socket(&attempt.host) {
        (
            format!(
                "The registry asked for a password over the unix socket in {}, a directory other \
                 users may write to: one of them can answer there in its place and ask for the \
                 password in clear text, and this libpq sends it. libpq 16 and later refuse \
                 (require_auth).",
                attempt.host
            ),
            "Set requirepeer to the registry's operating-system user in snowflake.registry, or \
             use a socket directory only that user may write, or install libpq 16 or later \
             (libpq5).",
        )
    } else {
        (
            "The registry asked for a password, and snowflake.registry does not make libpq \
             authenticate the server (sslmode is not verify-ca or verify-full): whoever \
             answers in the registry's place can ask for the password in clear text, and this \
             libpq sends it. libpq 16 and later refuse (require_auth)."
                .to_string(),
            "Set sslmode=verify-full (with sslrootcert) in snowflake.registry, or install libpq \
             16 or later (libpq5), or authenticate the fleet without a password (a certificate), \
             or reach the registry over a unix socket.",
        )
    };
    errors::report(
        Code::ERRCODE_WARNING,
        format!(
            "pg_snowflake: the libpq loaded ({}.{}) cannot refuse to send the registry's password \
             in clear text",
            version / 10000,
            version % 10000
        ),
        hint,
    )
    .detail(detail)
    .warn();
}

/// A socket directory (libpq's `host` that starts with a slash) or an abstract socket (`@`).
fn is_socket(host: &str) -> bool {
    host.starts_with('/') || host.starts_with('@')
}

/// Whether `host` is a socket that only its server can answer on: libpq checks the server's
/// user (`requirepeer`), or the socket's directory is no other user's to write (an abstract
/// socket's name anyone in the network namespace can take).
fn private_socket(host: &str, conninfo: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    if !is_socket(host) {
        return false;
    }
    if libpq::option(conninfo, c"requirepeer").is_some_and(|p| !p.is_empty()) {
        return true;
    }
    // World-writable (as /tmp is): anyone may make the socket file while the server is down.
    host.starts_with('/') && std::fs::metadata(host).is_ok_and(|m| m.mode() & 0o002 == 0)
}

/// `connect_timeout`'s default, as above (libpq applies it to blocking connections only; `open`
/// is told).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one statement may wait for the registry's answer (its `statement_timeout` is 10 s).
const QUERY_TIMEOUT: Duration = Duration::from_secs(15);

/// Waits for the registry's socket, or the latch: a SIGTERM (a fast shutdown,
/// `pg_terminate_backend`) ends the worker at once, wherever its call to the registry is; a
/// postmaster that died ends it too.
fn wait(fd: std::ffi::c_int, write: bool, timeout: Duration) -> libpq::Waited {
    let (fired, socket) = wait_on_socket(fd, write, timeout, pg_sys::WL_LATCH_SET);
    if fired & pg_sys::WL_LATCH_SET != 0 {
        // SAFETY: resetting this process's own latch, before looking at why it was set.
        unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
        if mutant!(registry_wait_latch, { background::stopping() }, { false }) {
            // SAFETY: proc_exit runs PostgreSQL's exit callbacks and does not return; the
            // connection goes with the process. Exit code 1: as after the worker's own wait.
            unsafe { pg_sys::proc_exit(1) };
        }
    }
    if fired & pg_sys::WL_TIMEOUT != 0 && fired & socket == 0 {
        libpq::Waited::TimedOut
    } else {
        libpq::Waited::Ready
    }
}

/// `wait` during the release at a clean shutdown: the latch is set already (the SIGTERM), so
/// only the socket, the timeout and the postmaster's death end it.
fn wait_at_shutdown(fd: std::ffi::c_int, write: bool, timeout: Duration) -> libpq::Waited {
    let (fired, socket) = wait_on_socket(fd, write, timeout, 0);
    if fired & socket == 0 {
        libpq::Waited::TimedOut
    } else {
        libpq::Waited::Ready
    }
}

/// One wait for the registry's socket, the timeout, the postmaster's death and `also` (the
/// latch, or nothing): the events that fired, and the socket's event.
fn wait_on_socket(fd: std::ffi::c_int, write: bool, timeout: Duration, also: u32) -> (u32, u32) {
    let socket = if write { pg_sys::WL_SOCKET_WRITEABLE } else { pg_sys::WL_SOCKET_READABLE };
    let events = also | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH | socket;
    // SAFETY: this process's own latch and a socket libpq owns, as libpqwalreceiver waits.
    let fired = unsafe {
        pg_sys::WaitLatchOrSocket(
            pg_sys::MyLatch,
            events as i32,
            fd,
            timeout.as_millis().min(i32::MAX as u128) as std::ffi::c_long,
            pg_sys::PG_WAIT_EXTENSION,
        )
    } as u32;
    (fired, socket)
}

/// The session settings of every call, whatever the connection string or the registry's
/// defaults say: a lease is used only once the registry has it durably (`synchronous_commit`),
/// and no call waits long on a lock.
const SESSION: &str = "SELECT pg_catalog.set_config('synchronous_commit', 'on', false),
        pg_catalog.set_config('default_transaction_read_only', 'off', false),
        pg_catalog.set_config('statement_timeout', '10s', false),
        pg_catalog.set_config('lock_timeout', '5s', false),
        pg_catalog.set_config('idle_in_transaction_session_timeout', '0', false),
        pg_catalog.set_config('default_transaction_isolation', 'read committed', false)";

pub fn register() {
    background::register(
        "pg_snowflake registry",
        "pg_snowflake_registry_main",
        Reaches::SharedMemory,
        Duration::from_secs(5),
    );
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn pg_snowflake_registry_main(_arg: pg_sys::Datum) {
    background::attach_signals();
    let Some(registry) = super::get() else {
        return;
    };
    // libpq: the server's own if it has one in its library directory, else the system's.
    // SAFETY: pkglib_path is a NUL-terminated path PostgreSQL set at start.
    let server_lib =
        unsafe { CStr::from_ptr((&raw const pg_sys::pkglib_path).cast::<std::ffi::c_char>()) }
            .to_string_lossy()
            .into_owned();
    let conninfo = gucs::registry().unwrap_or_default();
    let loaded = libpq::load(Some(Path::new(&server_lib)));
    // Before anything can quote the string: its secrets, as written and as libpq reads them.
    let decoded: Vec<String> =
        [c"password", c"sslpassword"].iter().filter_map(|k| libpq::option(&conninfo, k)).collect();
    super::redact::know_secrets(&conninfo, &decoded);
    let checked = loaded.and_then(|()| {
        libpq::check_conninfo(&conninfo)
            .map_err(|why| format!("snowflake.registry is not a valid connection string: {why}"))
    });
    if let Err(why) = checked {
        // Nothing to retry until the configuration changes, which takes a restart. (libpq
        // quotes a string it cannot parse: `report` masks its password.)
        registry.report(Problem::Settings, &why);
        while background::wait(Duration::from_secs(3600)) {}
        // SAFETY: see below.
        unsafe { pg_sys::proc_exit(1) };
    }
    mutant!(registry_memory, { libpq::bound_memory() }, {});
    registry.libpq_version.store(libpq::version().max(0) as u32, Ordering::Release);
    loop {
        let wait = renew(registry);
        warn_of_cleartext(&conninfo);
        if !background::wait(wait) {
            if server_stopping() {
                release(registry);
            }
            // SIGTERM. Exit code 1: the postmaster starts the worker again after its restart
            // time (at a shutdown it starts nothing).
            // SAFETY: proc_exit runs PostgreSQL's exit callbacks and does not return.
            unsafe { pg_sys::proc_exit(1) };
        }
    }
}

/// One call to the registry; returns how long to wait before the next.
fn renew(registry: &Registry) -> Duration {
    let lease = gucs::registry_lease();
    let every = lease / 3;
    if registry.source() == Source::Lost {
        return lease; // refused until restart; nothing to ask
    }
    let layout = gucs::layout();
    let held = registry.worker_id();
    let cached = || cache::read(Path::new(".")).ok().flatten().map(|l| l.worker_id);
    let ask = Ask {
        namespace: gucs::registry_namespace(),
        held,
        wanted: held.or(gucs::worker_id_setting()),
        preferred: held.or_else(cached),
        place: identity::place(),
        secret: registry.secret(),
        next_secret: registry.next_secret(),
    };
    let covered_until_ms = clock::now_unix_ms() + lease.as_millis() as i64;
    match call(&ask, covered_until_ms)
        .or_else(|e| renew_as_before(registry, &ask, covered_until_ms, e))
    {
        Ok(granted) => {
            // The registry knows this start by its next secret from now on.
            registry.take_next_secret();
            if held.is_some_and(|w| w != granted.worker_id) {
                let why = format!("the registry answered with worker id {}", granted.worker_id);
                lose(registry, &why);
                return lease;
            }
            beside_another_start(registry, &ask, &granted);
            // What this server may use: what it asked for, or less if the registry recorded less
            // (its clock far behind this one's).
            let covered_until_ms = covered_until_ms.min(granted.recorded_until_ms);
            let lease_now = cache::Lease {
                system_identifier: system_identifier(),
                namespace: ask.namespace.clone(),
                layout: layout.describe(),
                worker_id: granted.worker_id,
                covered_until_ms,
                start_above_ms: granted.start_above_ms,
                expires_ms: granted.expires_ms,
                place_check: ask.place.check.clone(),
                place: ask.place.description.clone(),
            };
            // Cached before it is used: a restart must never use less than it already did.
            if let Err(e) = cache::write(Path::new("."), &lease_now) {
                let why = format!("the lease cannot be cached in {}: {e}", cache::FILE_NAME);
                registry.report(Problem::Cache, &why);
                return RETRY.min(every);
            }
            let generator = generator::get();
            if !generator.lease_from_registry(layout, granted.start_above_ms, covered_until_ms) {
                // Asked to stop while it waited for a renewal: the loop ends at once.
                return Duration::ZERO;
            }
            if registry.source() != Source::Leased {
                errors::log(format!(
                    "pg_snowflake: worker id {} is leased from the registry",
                    granted.worker_id
                ));
            }
            registry.hold(&lease_now, granted.expires_ms, Source::Leased);
            registry.renewed_ms.store(clock::now_unix_ms(), Ordering::Release);
            registry.report(Problem::None, "");
            every
        }
        Err((Problem::Held | Problem::Lost, why))
            if held.is_some() && mutant!(registry_lost, { true }, { false }) =>
        {
            lose(registry, &why);
            lease
        }
        Err((kind, why)) => {
            registry.report(kind, &why);
            RETRY.min(every)
        }
    }
}

/// Whether the postmaster is shutting down (smart or fast), not this worker alone being
/// terminated: the postmaster writes `stopping` to line 8 of `postmaster.pid` (the status
/// `pg_ctl` waits on) before it signals any process to end.
fn server_stopping() -> bool {
    let pid_file = std::fs::read_to_string("postmaster.pid");
    mutant!(
        release_at_stop_only,
        {
            pid_file.is_ok_and(|pid_file| {
                pid_file.lines().nth(7).is_some_and(|s| s.trim() == "stopping")
            })
        },
        { true }
    )
}

/// At a clean shutdown, gives the lease back to the registry, so that the worker id's next holder
/// need not wait for it to run out (5 minutes at the default): a switchover's new primary, a copy
/// of this data directory, another member. Ids stop first, and the registry records as the worker
/// id's coverage the time below which they all lie (`close_for_release`), so that the next
/// holder starts above them. The cached lease is emptied before the registry hears of it: a
/// restart then waits for the registry, instead of using a coverage the registry no longer
/// records for it. Nothing is given back when the registry cannot be
/// reached at once (the cache stays, for a restart in place meanwhile) or the lease is not this
/// start's (cached, lost): it runs out as after a crash. A shutdown waits for this at most 4 s
/// (`AT_SHUTDOWN`, and 1 s for a renewal under way).
fn release(registry: &Registry) {
    let (Some(worker_id), Some(secret)) = (registry.worker_id(), registry.secret()) else {
        return;
    };
    if registry.source() != Source::Leased {
        return;
    }
    let conn = match connect(&AT_SHUTDOWN) {
        Ok(conn) => conn,
        Err((_, why)) => {
            errors::log(format!(
                "pg_snowflake: worker id {worker_id} is not given back to the registry, which \
                 cannot be reached ({}): its lease runs out as after a crash, and stays cached \
                 for a restart here",
                super::redact::redact(&why)
            ));
            return;
        }
    };
    let layout = gucs::layout();
    let Some(used_until_ms) = generator::get().close_for_release(layout, Duration::from_secs(1))
    else {
        return;
    };
    let Ok(Some(mut cached)) = cache::read(Path::new(".")) else { return };
    // Given back: nothing left to start with (a start in place would otherwise make ids under
    // the cached worker id while another server holds it), only the worker id to ask for first.
    mutant!(
        registry_release_cache,
        {
            cached.covered_until_ms = 0;
        },
        {}
    );
    if cache::write(Path::new("."), &cached).is_err() {
        return;
    }
    let ask = Ask {
        namespace: gucs::registry_namespace(),
        held: Some(worker_id),
        wanted: Some(worker_id),
        preferred: Some(worker_id),
        place: identity::place(),
        secret: Some(secret),
        next_secret: registry.next_secret(),
    };
    match ask_registry(&conn, &ask, Mode::Release { used_until_ms }, &AT_SHUTDOWN) {
        Ok(Answer::Released { worker_id, recorded_until_ms }) => errors::log(format!(
            "pg_snowflake: worker id {worker_id} is given back to the registry; its next holder \
             starts above {}{}",
            crate::text::iso_unix(recorded_until_ms),
            if recorded_until_ms > used_until_ms {
                format!(
                    ", what the starts before this one were granted (this server's ids lie below \
                     {}; it resumed the lease here without their release)",
                    crate::text::iso_unix(used_until_ms)
                )
            } else {
                String::new()
            }
        )),
        Ok(Answer::Granted(_)) => {}
        Err((_, why)) => errors::log(format!(
            "pg_snowflake: worker id {worker_id} could not be given back to the registry, and its \
             lease runs out as after a crash: {}",
            super::redact::redact(&why)
        )),
    }
}

/// A renewal the registry answered `lost`, tried once more with this start's secret before last:
/// a registry that failed over to a standby which had not received the last renewal (or was
/// restored to just before it) knows the start by that one, and renews (taking the next secret,
/// as ever). Only the registry that holds exactly that hash renews: a clone of this server's
/// memory has the same two secrets, and once either renewed, the registry holds a third that
/// the other never saw, and tells it `lost` both times. Any other answer stands.
fn renew_as_before(
    registry: &Registry,
    ask: &Ask,
    covered_until_ms: i64,
    lost: (Problem, String),
) -> Result<Granted, (Problem, String)> {
    let previous = mutant!(registry_previous_secret, { registry.previous_secret() }, { None });
    let (Problem::Lost, Some(previous)) = (lost.0, previous) else {
        return Err(lost);
    };
    let again = Ask { secret: Some(previous), ..ask.clone() };
    let granted = call(&again, covered_until_ms)?;
    errors::log(
        "pg_snowflake: the registry had not recorded this server's last renewal (it failed over \
         to a standby that had not received it, or was restored): renewed with the secret before",
    );
    Ok(granted)
}

/// Another start of this cluster holds a worker id beside this one, as the registry names it: one
/// of the two is a copy of the other's data directory (an image, a backup, a snapshot), or a
/// standby promoted while the other goes on; or the other stopped, and its lease has not run out
/// yet (an ordinary failover). Said once for each other server, and kept for
/// `snowflake_stats()`; forgotten once the registry names none.
fn beside_another_start(registry: &Registry, ask: &Ask, granted: &Granted) {
    let Some(other) = &granted.copy_of else {
        if registry.copy_of.get().is_some() {
            registry.copy_of.set("");
        }
        return;
    };
    if registry.copy_of.get().as_deref() == Some(other.as_str()) {
        return;
    }
    registry.copy_of.set(other);
    errors::report(
        Code::ERRCODE_WARNING,
        format!(
            "pg_snowflake: another server of this cluster runs beside this one ({}): {other}; \
             one of the two is a copy of the other's data directory or a standby promoted while \
             the other went on, or the other stopped and its lease has not run out: this one \
             makes ids with worker id {} of its own",
            ask.place.description, granted.worker_id
        ),
        "Nothing is needed: no id is made twice. If the two should not run side by side, stop \
         one of them.",
    )
    .warn();
}

/// The worker id went to another cluster: no more ids until restart, and no cached lease to
/// restart with (the restart leases anew).
fn lose(registry: &Registry, why: &str) {
    generator::get().close_ceiling();
    if let Err(e) = cache::remove(Path::new(".")) {
        errors::report(
            Code::ERRCODE_WARNING,
            format!("pg_snowflake: could not remove {}: {e}", cache::FILE_NAME),
            format!(
                "Remove {} by hand before the next start: a lease that was lost must not come \
                 back.",
                cache::FILE_NAME
            ),
        )
        .warn();
    }
    registry.set_problem(why);
    registry.source.store(Source::Lost as u32, Ordering::Release);
    errors::report(
        Code::ERRCODE_WARNING,
        format!(
            "pg_snowflake: this server lost its worker id lease, and refuses ids until it is \
             restarted: {}",
            super::redact::redact(why)
        ),
        super::lost_hint(),
    )
    .warn();
}

/// A lease as the registry granted it.
struct Granted {
    worker_id: u32,
    /// When another cluster may take it, by the registry's clock (Unix ms).
    expires_ms: i64,
    /// The coverage of its previous holders, to start above.
    start_above_ms: i64,
    /// The coverage the registry recorded for this cluster (at most what it asked for).
    recorded_until_ms: i64,
    /// Another start of this cluster, which held the worker id this one asked for (a copy of
    /// this data directory, or a split brain), as the registry names it.
    copy_of: Option<String>,
}

/// What a call asks of the registry.
#[derive(Clone, Copy)]
enum Mode {
    /// A lease, or its renewal, covering ids until this Unix ms.
    Hold { covered_until_ms: i64 },
    /// The lease given back at a clean shutdown: every id of this data directory lies below
    /// this Unix ms.
    Release { used_until_ms: i64 },
}

/// What the registry answered a call.
enum Answer {
    Granted(Granted),
    Released { worker_id: u32, recorded_until_ms: i64 },
}

/// How long a call waits for the registry, and on what.
struct Patience {
    /// At most this long to connect (else `connect_timeout` in `snowflake.registry`, or 5 s).
    connect: Option<Duration>,
    query: Duration,
    wait: fn(std::ffi::c_int, bool, Duration) -> libpq::Waited,
}

/// A running server's calls: a SIGTERM ends them at once (`wait`).
const RUNNING: Patience = Patience { connect: None, query: QUERY_TIMEOUT, wait };

/// The release at a clean shutdown: its SIGTERM came already, and the shutdown waits for it, so
/// each step is short and no latch ends it (`wait_at_shutdown`): at most 1 s to connect and 1 s
/// for each of two statements (a registry answers a call in milliseconds).
const AT_SHUTDOWN: Patience = Patience {
    connect: Some(Duration::from_secs(1)),
    query: Duration::from_secs(1),
    wait: wait_at_shutdown,
};

/// What one call asks for.
#[derive(Clone)]
struct Ask {
    namespace: String,
    /// The worker id this server holds now, if it holds one.
    held: Option<u32>,
    /// Exactly this worker id (`snowflake.worker_id`), or any free one.
    wanted: Option<u32>,
    /// The one to take first when it is free: held now, or cached by an earlier start.
    preferred: Option<u32>,
    place: identity::Place,
    /// The secret the registry knows this start by, from its first grant on.
    secret: Option<[u8; 32]>,
    next_secret: [u8; 32],
}

/// What went wrong, in words, from an error of the registry's server or of the connection: by
/// its SQLSTATE, never by the words of its message (a registry of another release words them
/// otherwise).
fn failure(e: libpq::Error) -> (Problem, String) {
    if mutant!(registry_answer_problem, { e.unexpected_answer }, { false }) {
        return (Problem::Answer, e.to_string());
    }
    let kind = match e.sqlstate.as_deref() {
        None => return (Problem::Unreachable, format!("the registry is unreachable: {e}")),
        Some("42704" | "42883" | "3F000") => Problem::NotInstalled,
        // A lock or statement timeout: another transaction there held what the call needed.
        Some("55P03" | "57014") => Problem::Busy,
        Some(_) => Problem::Refused,
    };
    let code = e.sqlstate.clone().unwrap_or_default();
    (kind, format!("the registry refused the lease ({code}): {e}"))
}

fn refused(message: String) -> (Problem, String) {
    (Problem::Refused, message)
}

/// An answer that no registry gives: a grant out of range, or not a lease at all.
fn no_lease(message: String) -> (Problem, String) {
    (Problem::Answer, message)
}

/// The statement that leases: it calls `snowflake.snowflake_registry_hold()` only if that is
/// pg_snowflake's own function in a schema that a superuser owns, checked in the same statement
/// (`ours`, a one-time filter of the subquery that calls it): the registry's database may belong
/// to a role that would plant a look-alike answering every member "worker id 0 for a day". Any
/// other owner is told apart from a superuser's schema by the name alone only while it is not
/// renamed, and only a superuser can rename a superuser's schema. Every parameter typed, and
/// every type named by schema (the registry's owner may set its database's search_path, with a
/// domain named `text` on it): an overload with untyped parameters could be preferred otherwise.
const LEASE: &str = "
    SELECT v.ours, l.outcome, l.worker_id,
           (pg_catalog.date_part('epoch', l.expires) OPERATOR(pg_catalog.*) 1000)::pg_catalog.int8,
           l.start_above_ms, l.recorded_until_ms, l.namespace_layout, l.copy_of
      FROM (SELECT EXISTS (
                SELECT FROM pg_catalog.pg_proc p
                  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
                  JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
                  JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
                  JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
                 WHERE p.oid OPERATOR(pg_catalog.=) pg_catalog.to_regprocedure(
                           'snowflake.snowflake_registry_hold(pg_catalog.text, pg_catalog.text, '
                           'pg_catalog.int8, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4, '
                           'pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.int4, '
                           'pg_catalog.int8, pg_catalog.text, pg_catalog.int8, pg_catalog.int8, '
                           'pg_catalog.text, pg_catalog.text, pg_catalog.text)')
                   AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                   AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                   AND d.deptype OPERATOR(pg_catalog.=) 'e'
                   AND e.extname OPERATOR(pg_catalog.=) 'pg_snowflake'
                   AND n.nspname OPERATOR(pg_catalog.=) 'snowflake'
                   AND r.rolsuper) AS ours) v
      LEFT JOIN LATERAL (
           SELECT * FROM snowflake.snowflake_registry_hold(
                    $1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.int8,
                    $4::pg_catalog.int4, $5::pg_catalog.int4, $6::pg_catalog.int4,
                    $7::pg_catalog.int4, $8::pg_catalog.bool, $9::pg_catalog.int4,
                    $10::pg_catalog.int4, $11::pg_catalog.int8, $12::pg_catalog.text,
                    $13::pg_catalog.int8, $14::pg_catalog.int8, $15::pg_catalog.text,
                    $16::pg_catalog.text, $17::pg_catalog.text)
            WHERE v.ours OFFSET 0) l ON true";

/// The answers the registry may give, and nothing else (see `libpq::Shape`): the session's six
/// settings, one lease of eight columns (the longest values are a namespace's layout, about 100
/// bytes, and the holder another start of this cluster is named as), and the version of
/// pg_snowflake there.
const SESSION_ANSWER: libpq::Shape = libpq::Shape { rows: 1, columns: 6, value_bytes: 64 };
const LEASE_ANSWER: libpq::Shape = libpq::Shape { rows: 1, columns: 8, value_bytes: 512 };
const VERSION_ANSWER: libpq::Shape = libpq::Shape { rows: 1, columns: 1, value_bytes: 64 };
/// Unix ms of the year 10000: no lease runs out later.
const LAST_MS: i64 = 253_402_300_800_000;

/// Calls `snowflake.snowflake_registry_hold()` in the registry.
fn call(ask: &Ask, covered_until_ms: i64) -> Result<Granted, (Problem, String)> {
    let conn = connect(&RUNNING)?;
    match ask_registry(&conn, ask, Mode::Hold { covered_until_ms }, &RUNNING)? {
        Answer::Granted(granted) => Ok(granted),
        Answer::Released { .. } => {
            Err(no_lease("the registry released a lease this server did not give back".into()))
        }
    }
}

/// A connection to the registry, its session set up.
fn connect(patience: &Patience) -> Result<libpq::Connection, (Problem, String)> {
    let conninfo = gucs::registry().unwrap_or_default();
    let connect_timeout = libpq::connect_timeout(&conninfo).unwrap_or(CONNECT_TIMEOUT);
    let connect_timeout =
        patience.connect.map_or(connect_timeout, |most| connect_timeout.min(most));
    let conn =
        libpq::Connection::open(&conninfo, &connection_defaults(), connect_timeout, &patience.wait)
            .map_err(failure)?;
    conn.query(SESSION, &[], patience.query, &patience.wait, SESSION_ANSWER).map_err(failure)?;
    Ok(conn)
}

/// One call of `snowflake.snowflake_registry_hold()`: a lease, its renewal, or its release.
fn ask_registry(
    conn: &libpq::Connection,
    ask: &Ask,
    mode: Mode,
    patience: &Patience,
) -> Result<Answer, (Problem, String)> {
    let (lease_ms, covered_until_ms) = match mode {
        Mode::Hold { covered_until_ms } => {
            (gucs::registry_lease().as_millis() as i64, covered_until_ms)
        }
        Mode::Release { used_until_ms } => (0, used_until_ms),
    };
    let reply = call_hold(conn, ask, lease_ms, covered_until_ms, patience)?;
    if mutant!(member_gate, { reply.text(0) != Some("t") }, { reply.text(0).is_none() }) {
        return Err(refused(
            "the registry's snowflake.snowflake_registry_hold() is not pg_snowflake's own (a \
             member of the extension, in the schema snowflake owned by a superuser): no lease \
             is taken from it"
                .into(),
        ));
    }
    match reply.text(1) {
        Some("granted") => reply.granted(ask, covered_until_ms).map(Answer::Granted),
        Some("released") if matches!(mode, Mode::Release { .. }) => {
            match (reply.number(2), ask.held, reply.number(5)) {
                (Some(w), Some(held), Some(recorded_until_ms))
                    if w == i64::from(held) && (0..LAST_MS).contains(&recorded_until_ms) =>
                {
                    Ok(Answer::Released { worker_id: held, recorded_until_ms })
                }
                _ => Err(no_lease(
                    "the registry released a worker id this server did not hold".into(),
                )),
            }
        }
        outcome => Err(reply.refusal(outcome, ask)),
    }
}

/// The call itself, with this server's layout, identity and secrets: the registry's one row.
fn call_hold(
    conn: &libpq::Connection,
    ask: &Ask,
    lease_ms: i64,
    covered_until_ms: i64,
    patience: &Patience,
) -> Result<Reply, (Problem, String)> {
    let namespace = ask.namespace.as_str();
    let wanted = ask.wanted;
    let layout = gucs::layout();
    let rows = conn
        .query(
            &mutant_text!(
                LEASE,
                member_gate: "WHERE v.ours OFFSET 0" => "WHERE true OFFSET 0",
                member_types: "_hold(pg_catalog.text, pg_catalog.text, " => "_hold(text, text, ",
            ),
            &[
                Some(namespace.to_string()),
                Some(layout.preset.name().to_string()),
                Some(layout.epoch_unix_ms.to_string()),
                Some(layout.unit_ms.to_string()),
                Some(layout.time_bits.to_string()),
                Some(layout.worker_bits.to_string()),
                Some(layout.sequence_bits.to_string()),
                Some((layout.order == Order::SequenceThenWorker).to_string()),
                wanted.map(|w| w.to_string()),
                ask.preferred.map(|w| w.to_string()),
                // The registry stores it as a bigint, as pg_control_system() shows it.
                Some((system_identifier() as i64).to_string()),
                Some(node_name()),
                Some(lease_ms.to_string()),
                Some(covered_until_ms.to_string()),
                Some(ask.place.credential.clone()),
                ask.secret.map(|s| identity::hex(&s)),
                Some(identity::hex(&ask.next_secret)),
            ],
            patience.query,
            &patience.wait,
            LEASE_ANSWER,
        )
        .map_err(|e| match failure(e) {
            (Problem::NotInstalled, why) => (Problem::NotInstalled, not_installed(conn, why)),
            other => other,
        })?;
    Ok(Reply(rows.into_iter().next().unwrap_or_default()))
}

/// The registry's answer: its columns as text, in the order of LEASE_ANSWER (whether the
/// function is pg_snowflake's own, the outcome, the worker id, the expiry, the bound to start
/// above, the coverage recorded, the namespace's layout, another holder of this cluster). The
/// registry is a peer: nothing in it is taken unchecked.
struct Reply(Vec<Option<String>>);

impl Reply {
    fn text(&self, i: usize) -> Option<&str> {
        self.0.get(i)?.as_deref()
    }

    fn number(&self, i: usize) -> Option<i64> {
        self.text(i)?.parse().ok()
    }

    /// Why the registry gave no lease, from its outcome.
    fn refusal(&self, outcome: Option<&str>, ask: &Ask) -> (Problem, String) {
        let namespace = ask.namespace.as_str();
        let wanted = ask.wanted;
        let layout = gucs::layout();
        match outcome {
                Some("lost") => {
                    (
                        Problem::Lost,
                        format!(
                            "the registry renews worker id {} of namespace \"{namespace}\" for another \
                             start of this cluster now (this one did not renew it in time, or another \
                             server presented this one's secret: a clone of it, or a split brain)",
                            ask.held.map_or("?".to_string(), |w| w.to_string())
                        ),
                    )
                }
                Some("held") => {
                    let wanted = wanted.map_or("?".to_string(), |w| w.to_string());
                    // Another server of this cluster holds it (this one is a copy of its data
                    // directory, or it of this one's): the registry names it, as to a copy that took
                    // another worker id.
                    let holder = match self.text(7) {
                        Some(other) => {
                            format!("another server of this cluster, {}", printable(other.as_bytes()))
                        }
                        None => "another cluster".to_string(),
                    };
                    (
                        Problem::Held,
                        format!(
                            "the registry refused the lease: worker id {wanted} of namespace \
                             \"{namespace}\" is leased to {holder}"
                        ),
                    )
                }
                Some("full") => {
                    (
                        Problem::Full,
                        format!(
                            "the registry refused the lease: no worker id of namespace \"{namespace}\" \
                             is free"
                        ),
                    )
                }
                Some("layout") => {
                    (
                        Problem::Layout,
                        format!(
                            "the registry refused the lease: namespace \"{namespace}\" makes ids of \
                             layout {}, and this server's layout is {}",
                            self.text(6).unwrap_or("?"),
                            layout.describe_fields()
                        ),
                    )
                }
            _ => no_lease("the registry's answer is not a lease".into()),
        }
    }

    /// The lease granted, checked against what was asked.
    fn granted(&self, ask: &Ask, covered_until_ms: i64) -> Result<Granted, (Problem, String)> {
        let (wanted, layout) = (ask.wanted, gucs::layout());
        let (Some(w), Some(expires_ms), Some(start_above_ms), Some(recorded_until_ms)) =
            (self.number(2), self.number(3), self.number(4), self.number(5))
        else {
            return Err(no_lease("the registry's answer is not a lease".into()));
        };
        // Never trusted blindly: a worker id outside the layout would spill into the other fields.
        let worker_id = u32::try_from(w)
            .ok()
            .filter(|&w| {
                mutant!(registry_worker_range, { w <= layout.max_worker_id() }, { true })
                    && wanted.is_none_or(|wanted| wanted == w)
            })
            .ok_or_else(|| {
                no_lease(format!(
                    "the registry answered with worker id {w}, which this server did not ask for"
                ))
            })?;
        if start_above_ms < 0 || recorded_until_ms < 0 || !(1..LAST_MS).contains(&expires_ms) {
            return Err(no_lease("the registry's answer is not a lease".into()));
        }
        // A grant whose previous holders covered the whole lease asked for leaves no time for an
        // id (one with start_above_ms = 2^63 - 1 was taken, cached across restarts, and every id
        // failed as past the layout's end): refused, never cached.
        if mutant!(
            registry_start_above,
            { start_above_ms >= covered_until_ms.min(recorded_until_ms) },
            { false }
        ) {
            return Err(no_lease(format!(
                "the registry granted worker id {worker_id} to start above {}, at or past the end \
                 of the lease it was asked for: no id would fit",
                if start_above_ms < LAST_MS {
                    crate::text::iso_unix(start_above_ms)
                } else {
                    format!("{start_above_ms} ms after 1970")
                }
            )));
        }
        // The holder it did not take from: names a server of this cluster, made printable (it is
        // the registry's text).
        let copy_of = self.text(7).map(|t| crate::text::printable(t.as_bytes()));
        Ok(Granted { worker_id, expires_ms, start_above_ms, recorded_until_ms, copy_of })
    }
}

/// Why the lease function is missing: no pg_snowflake in the registry's database, or one older
/// than the first release whose members call `snowflake.snowflake_registry_hold()` (0.6.0).
fn not_installed(conn: &libpq::Connection, why: String) -> String {
    let version = conn
        .query(
            "SELECT e.extversion FROM pg_catalog.pg_extension e
              WHERE e.extname OPERATOR(pg_catalog.=) 'pg_snowflake'",
            &[],
            QUERY_TIMEOUT,
            &wait,
            VERSION_ANSWER,
        )
        .ok()
        .and_then(|rows| rows.into_iter().next())
        .and_then(|row| row.into_iter().next().flatten());
    match version {
        None => "pg_snowflake is not installed in the registry's database".into(),
        Some(v) => format!(
            "the registry's database has pg_snowflake {v}, whose registry does not know which \
             start of a cluster holds a lease (0.6.0 does): update it there first, before its \
             members ({why})"
        ),
    }
}
