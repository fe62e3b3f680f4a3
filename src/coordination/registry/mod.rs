//! The worker-id registry: with `snowflake.registry` set, this server leases its worker id from
//! a table in another PostgreSQL database (sql/registry.sql) instead of taking it from
//! `snowflake.worker_id` alone, so that a fleet needs no hand-kept list of worker ids.
//!
//! # The protocol
//! - A background worker (`worker`) connects with libpq and calls `snowflake_registry_hold()`
//!   at start and every third of `snowflake.registry_lease`. Each call reports how far this
//!   server's ids may go (`covered_until`: the clock now plus one lease), and is granted a worker
//!   id until then; only then does the generator's ceiling (rule 5 of `generator`) move there.
//!   Ids therefore always lie below what the registry has recorded for their worker id.
//! - A worker id whose lease ran out may go to another cluster, which starts above everything
//!   its previous holders covered (`start_above`): the generator's floor, so reuse never
//!   repeats an id whatever the clocks say (a floor ahead of the clock by more than
//!   `snowflake.max_drift` makes callers wait, as after a backward clock step).
//! - A lease belongs to one start of one data directory at one place, not to a system
//!   identifier, which every copy of the data directory shares (`identity`, 0.6.0): each start
//!   holds a secret that only it knows, presents it at every renewal with the next one, and the
//!   registry renews only for it. A new start (after a stop, a crash, a promotion) has no secret:
//!   where its data directory's last start held the lease (the same boot, host and directory) it
//!   resumes it, since that start has ended; anywhere else (a copy, a restore, a promoted standby
//!   on another host, a split brain) it takes a worker id of its own while the old holder's
//!   lease runs, and the registry names the holder it did not take from (`copy_of`).
//! - Each grant is cached durably in the data directory (`cache`) before it is used, with its
//!   place: a restart at that place while the registry is unreachable goes on with the cached
//!   worker id until its lease runs out; a start anywhere else waits for the registry.
//! - A server whose worker id went to another cluster or another start (it was cut off for
//!   longer than its lease, or another server presented its secret) refuses ids until it is
//!   restarted, when it leases anew.
//! - Nothing here is on the hot path of a server with `snowflake.worker_id` and no registry; with
//!   a registry, the worker id costs two loads (the lease's source, then the worker id).

mod cache;
mod libpq;
mod redact;
mod worker;

use crate::errors::{self, Code};
use crate::layout::Layout;
use crate::shared_memory::{InitLock, Text};
use crate::text::{iso_unix, one_line, sentence};
use crate::{clock, generator, gucs, identity};
use pgrx::prelude::*;
use pgrx::{PGRXSharedMemory, PgSharedMemoryInitialization};
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// `worker_id` while this server holds no lease.
const NO_WORKER_ID: u32 = u32::MAX;
/// Words (8 bytes each) of the last problem's text kept in shared memory: 512 bytes, the last one
/// always a NUL.
const STATUS_WORDS: usize = 64;

/// Where the lease came from; kept in shared memory as its discriminant (0 to 3, in this
/// order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Source {
    /// No lease (yet, or any more).
    None,
    /// The cached lease of the previous run, not yet renewed by the registry.
    Cached,
    /// Granted or renewed by the registry.
    Leased,
    /// The registry gave the worker id to another cluster: refused until restart.
    Lost,
}

/// What went wrong last, which decides the hint of a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Problem {
    None = 0,
    /// No connection, or it broke during the call.
    Unreachable = 1,
    /// The registry's database lacks pg_snowflake.
    NotInstalled = 2,
    /// The wanted worker id is another cluster's.
    Held = 3,
    /// No worker id of the namespace is free.
    Full = 4,
    /// Any other refusal (a privilege, a lease function that is not pg_snowflake's).
    Refused = 5,
    /// The lease could not be cached in the data directory.
    Cache = 6,
    /// `snowflake.registry` cannot be read, or libpq cannot be loaded.
    Settings = 7,
    /// The namespace makes ids of another layout.
    Layout = 8,
    /// A transaction in the registry's database held what the call needed for too long.
    Busy = 9,
    /// An answer that no registry gives (COPY, more rows or columns than a lease, oversized
    /// values, a grant no id fits in): whoever answered, it is not taken.
    Answer = 10,
    /// The registry renews this server's worker id for another start of its cluster now.
    Lost = 11,
}

impl Problem {
    fn from_u32(n: u32) -> Problem {
        [
            Problem::None,
            Problem::Unreachable,
            Problem::NotInstalled,
            Problem::Held,
            Problem::Full,
            Problem::Refused,
            Problem::Cache,
            Problem::Settings,
            Problem::Layout,
            Problem::Busy,
            Problem::Answer,
            Problem::Lost,
        ]
        .get(n as usize)
        .copied()
        .unwrap_or(Problem::None)
    }

    /// What to do about it.
    fn hint(self) -> &'static str {
        match self {
            Problem::None => "The registry's worker leases a worker id at start: wait a moment.",
            Problem::Unreachable => {
                "Check that the registry in snowflake.registry is up and that this server can \
                 reach it (host, port, pg_hba.conf, the password file; a registry that asks for \
                 the password in clear text is refused unless snowflake.registry sets \
                 require_auth: use scram-sha-256 there); ids are handed out as soon as a worker \
                 id is leased."
            }
            Problem::NotInstalled => {
                "Install pg_snowflake 0.6.0 or later in the registry's database (CREATE \
                 EXTENSION, or ALTER EXTENSION ... UPDATE), and grant EXECUTE on \
                 snowflake.snowflake_registry_hold to the role in snowflake.registry."
            }
            Problem::Held => {
                "Give this server another snowflake.worker_id, or set it to -1 to lease a free \
                 one, and restart it."
            }
            Problem::Full => {
                "Use another snowflake.registry_namespace or a layout with more worker bits, or \
                 wait for a lease to run out."
            }
            Problem::Refused => {
                "Check the role in snowflake.registry (it needs EXECUTE on \
                 snowflake.snowflake_registry_hold in the registry's database), and what the \
                 detail names in the registry's database."
            }
            Problem::Cache => "Check that the data directory is writable and has space.",
            Problem::Layout => {
                "A namespace is one id space, of one layout: give the servers of each layout a \
                 namespace of their own (snowflake.registry_namespace), and restart this one."
            }
            Problem::Busy => {
                "A transaction in the registry's database held the rows or tables the call needed \
                 (pg_locks there says which); ids go on under the lease in force, and the worker \
                 tries again."
            }
            Problem::Answer => {
                "The server in snowflake.registry answered as no pg_snowflake registry does: check \
                 that it names the registry, and set sslmode=verify-full there so that nothing on \
                 the network path can answer in its place; the worker tries again meanwhile."
            }
            Problem::Lost => {
                "Restart the server: it then takes a worker id of its own. If another server runs \
                 a copy of this data directory, that one holds the worker id now."
            }
            Problem::Settings => {
                "Correct snowflake.registry in postgresql.conf as the detail says, and restart \
                 the server."
            }
        }
    }
}

/// The lease of this server, in shared memory. Written only by the registry worker (and at
/// start by the postmaster); read by every backend.
#[repr(C)]
pub struct Registry {
    worker_id: AtomicU32,
    source: AtomicU32,
    /// Unix ms: the ids' time stays below this (the ceiling, as the registry recorded it).
    covered_until_ms: AtomicI64,
    /// Unix ms, by the registry's clock: when another cluster may take the worker id.
    expires_ms: AtomicI64,
    /// Unix ms: the coverage of the worker id's previous holders, which its ids start above.
    start_above_ms: AtomicI64,
    /// Unix ms of the last successful call to the registry (0: none since start).
    renewed_ms: AtomicI64,
    /// `Problem` of the last call.
    problem_kind: AtomicU32,
    /// `PQlibVersion()` of the libpq the worker loaded (0 until it has).
    libpq_version: AtomicU32,
    /// The last problem in words ("" while there is none).
    status: Text<STATUS_WORDS>,
    /// This start's secret (see `identity`), and the next one it sends with it; written by the
    /// registry worker only. `has_secret` is 1 while the registry knows `secret`: from this
    /// start's first grant on (a new start, and a crash reset of shared memory, begin without).
    secret: [AtomicU64; 4],
    next_secret: [AtomicU64; 4],
    has_secret: AtomicU32,
    /// The secret before `secret`, kept for one call: a registry that failed over to a standby
    /// which had not received the last renewal (or was restored to just before it) knows this
    /// start by it. 1 in `has_previous` once there is one.
    previous_secret: [AtomicU64; 4],
    has_previous: AtomicU32,
    /// Another start of this cluster that held the worker id this one asked for (a copy of this
    /// data directory, or a split brain), as the registry named it; "" when none did.
    copy_of: Text<STATUS_WORDS>,
}

// SAFETY: atomics only, no pointers: valid at the same address in every process.
unsafe impl PGRXSharedMemory for Registry {}

fn words_to_bytes(words: &[AtomicU64; 4]) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    for (chunk, word) in bytes.chunks_mut(8).zip(words) {
        chunk.copy_from_slice(&word.load(Ordering::Acquire).to_le_bytes());
    }
    bytes
}

fn store_words(words: &[AtomicU64; 4], bytes: &[u8; 32]) {
    for (chunk, word) in bytes.chunks(8).zip(words) {
        word.store(u64::from_le_bytes(chunk.try_into().unwrap()), Ordering::Release);
    }
}

/// What `snowflake_stats()` shows.
pub struct Snapshot {
    pub worker_id: Option<u32>,
    pub source: Source,
    pub covered_until_ms: i64,
    pub expires_ms: i64,
    pub renewed_ms: i64,
    pub problem: Option<String>,
    /// `PQlibVersion()` of the libpq the worker loaded (0 until it has).
    pub libpq_version: u32,
    /// Another start of this cluster that held the worker id this one asked for, if one did.
    pub copy_of: Option<String>,
}

impl Registry {
    fn empty() -> Registry {
        Registry {
            worker_id: AtomicU32::new(NO_WORKER_ID),
            source: AtomicU32::new(Source::None as u32),
            covered_until_ms: AtomicI64::new(0),
            expires_ms: AtomicI64::new(0),
            start_above_ms: AtomicI64::new(0),
            renewed_ms: AtomicI64::new(0),
            problem_kind: AtomicU32::new(Problem::None as u32),
            libpq_version: AtomicU32::new(0),
            status: Text::empty(),
            secret: [const { AtomicU64::new(0) }; 4],
            next_secret: [const { AtomicU64::new(0) }; 4],
            has_secret: AtomicU32::new(0),
            previous_secret: [const { AtomicU64::new(0) }; 4],
            has_previous: AtomicU32::new(0),
            copy_of: Text::empty(),
        }
    }

    fn worker_id(&self) -> Option<u32> {
        let w = self.worker_id.load(Ordering::Acquire);
        (w != NO_WORKER_ID).then_some(w)
    }

    fn source(&self) -> Source {
        match self.source.load(Ordering::Acquire) {
            1 => Source::Cached,
            2 => Source::Leased,
            3 => Source::Lost,
            _ => Source::None,
        }
    }

    /// A lease in force: the worker id, its coverage and where it came from. The source is
    /// written last and read first (`in_force`): whoever sees it sees the worker id.
    fn hold(&self, lease: &cache::Lease, expires_ms: i64, source: Source) {
        self.covered_until_ms.fetch_max(lease.covered_until_ms, Ordering::AcqRel);
        self.expires_ms.store(expires_ms, Ordering::Release);
        self.start_above_ms.store(lease.start_above_ms, Ordering::Release);
        self.worker_id.store(lease.worker_id, Ordering::Release);
        self.source.store(source as u32, Ordering::Release);
    }

    /// The worker id of a lease in force (cached or leased).
    fn in_force(&self) -> Option<u32> {
        match self.source() {
            Source::Cached | Source::Leased => self.worker_id(),
            Source::None | Source::Lost => None,
        }
    }

    /// Records the outcome of a call, and logs each new problem once (a WARNING): the server log
    /// says what a refusal cannot tell every role.
    fn report(&self, kind: Problem, problem: &str) {
        // On one line: the registry's own text is in it, and a line break would start a line
        // of the registry's choosing in this server's log.
        let problem = mutant!(registry_printable, { &one_line(&redact::redact(problem)) }, {
            &redact::redact(problem)
        });
        let before = self.problem();
        // Compared as it is kept: 0.6.0's review found a problem longer than the kept text
        // logged again at every call (a registry raising 900 characters, every 2 s).
        if before.as_deref().unwrap_or_default()
            == mutant!(registry_problem_once, { self.status.kept(problem) }, { problem.as_str() })
        {
            return;
        }
        self.problem_kind.store(kind as u32, Ordering::Release);
        self.set_problem(problem);
        if kind != Problem::None {
            errors::report(Code::ERRCODE_WARNING, format!("pg_snowflake: {problem}"), kind.hint())
                .warn();
        }
    }

    fn set_problem(&self, problem: &str) {
        self.status.set(&redact::redact(problem));
    }

    /// The secret the registry knows this start by, once it granted one.
    fn secret(&self) -> Option<[u8; 32]> {
        (self.has_secret.load(Ordering::Acquire) == 1).then(|| words_to_bytes(&self.secret))
    }

    /// The secret to replace it with at the next call: the same until a call is answered (the
    /// registry may have taken it before the answer was lost), then a new one.
    fn next_secret(&self) -> [u8; 32] {
        let next = words_to_bytes(&self.next_secret);
        if next != [0; 32] {
            return next;
        }
        let fresh = identity::new_secret();
        store_words(&self.next_secret, &fresh);
        fresh
    }

    /// The secret this start had before the current one, if it had one.
    fn previous_secret(&self) -> Option<[u8; 32]> {
        (self.has_previous.load(Ordering::Acquire) == 1)
            .then(|| words_to_bytes(&self.previous_secret))
    }

    /// The registry answered a call that sent `next_secret`: it is this start's secret now.
    fn take_next_secret(&self) {
        if let Some(secret) = self.secret() {
            store_words(&self.previous_secret, &secret);
            self.has_previous.store(1, Ordering::Release);
        }
        store_words(&self.secret, &words_to_bytes(&self.next_secret));
        self.has_secret.store(1, Ordering::Release);
        store_words(&self.next_secret, &[0; 32]);
    }

    fn problem(&self) -> Option<String> {
        self.status.get()
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            worker_id: self.worker_id(),
            source: self.source(),
            covered_until_ms: self.covered_until_ms.load(Ordering::Acquire),
            expires_ms: self.expires_ms.load(Ordering::Acquire),
            renewed_ms: self.renewed_ms.load(Ordering::Acquire),
            problem: self.problem(),
            libpq_version: self.libpq_version.load(Ordering::Acquire),
            copy_of: self.copy_of.get(),
        }
    }
}

struct RegistrySlot(AtomicPtr<Registry>);

static SLOT: RegistrySlot = RegistrySlot(AtomicPtr::new(std::ptr::null_mut()));

impl PgSharedMemoryInitialization for RegistrySlot {
    type Value = Registry;

    /// # Safety
    /// Called by pgrx from PostgreSQL's `shmem_request_hook`.
    unsafe fn on_shmem_request(&'static self) {
        // SAFETY: see above.
        unsafe { pg_sys::RequestAddinShmemSpace(size_of::<Registry>()) };
    }

    /// # Safety
    /// Called by pgrx from PostgreSQL's `shmem_startup_hook` in the postmaster, after the
    /// generator's (its hook was installed first, and each hook calls the previous one first).
    unsafe fn on_shmem_startup(&'static self, value: Registry) {
        // SAFETY: called where InitLock may be taken; the name stands for this type only.
        unsafe {
            let init = InitLock::acquire();
            let (ptr, found) = init.struct_set_once(c"pg_snowflake registry", value);
            self.0.store(ptr, Ordering::Release);
            drop(init);
            if !found {
                mutant!(
                    registry_cache,
                    {
                        start_from_cache(&*ptr);
                    },
                    {}
                );
            }
        }
    }
}

/// Why the registry settings were refused at start, if they were.
static PROBLEM: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets up the registry's shared state and worker when `snowflake.registry` is set. Only call
/// from `_PG_init` while the library is preloaded, after `generator::init`.
pub fn init() {
    if gucs::registry().is_none() {
        return;
    }
    generator::on_ceiling(refuse);
    generator::on_ahead(start_above_ahead);
    if let Err(problem) = check_settings() {
        // gucs::init has logged its own problems already.
        if gucs::problem().is_none() {
            errors::report(
                Code::ERRCODE_WARNING,
                format!("pg_snowflake: {problem}; snowflake_next() refuses until it is fixed"),
                gucs::settings_hint(),
            )
            .warn();
        }
        let _ = PROBLEM.set(problem);
    }
    pgrx::pg_shmem_init!(SLOT = Registry::empty());
    // SAFETY: a plain read of a flag set from the command line before _PG_init.
    if PROBLEM.get().is_none() && !unsafe { pg_sys::IsBinaryUpgrade } {
        worker::register();
    }
}

fn check_settings() -> Result<(), String> {
    if let Some(problem) = gucs::problem() {
        return Err(problem.to_string());
    }
    // The connection string is checked by the worker: libpq must not be loaded here, in the
    // postmaster (see `libpq`).
    let namespace = gucs::registry_namespace();
    if namespace.is_empty() || namespace.len() > 63 || namespace.chars().any(char::is_control) {
        return Err(format!(
            "snowflake.registry_namespace \"{}\" must be 1 to 63 characters without control \
             characters",
            namespace.escape_debug()
        ));
    }
    Ok(())
}

/// The registry's state, if `snowflake.registry` is set and the library preloaded.
fn get() -> Option<&'static Registry> {
    let ptr = SLOT.0.load(Ordering::Relaxed);
    // SAFETY: set once at shmem startup to a struct that lives as long as the cluster.
    (!ptr.is_null()).then(|| unsafe { &*ptr })
}

/// The layout and leased worker id where `snowflake.worker_id` gives none: `None` without a
/// registry; an error (55000, with the reason) while the registry has granted none.
#[inline]
pub fn generating() -> Option<(&'static Layout, u32)> {
    match get()?.in_force() {
        Some(w) => Some((gucs::layout(), w)),
        None => refuse(),
    }
}

/// The worker id the registry's lease gives now; `None` without a registry or a lease in force
/// (`worker_id::current`, which asks the settings first).
pub fn leased_worker_id() -> Option<u32> {
    get().and_then(Registry::in_force)
}

/// The registry's state for `snowflake_stats()`; `None` without a registry.
pub fn snapshot() -> Option<Snapshot> {
    get().map(Registry::snapshot)
}

/// Why no id can be made under the registry: 55000 with the last problem and what to do about
/// it. The problem names hosts, roles and other clusters, so only those who may read the
/// settings or the stats see it (superusers, pg_read_all_settings and pg_monitor); everyone
/// else learns that there is no lease, and that the server log says why.
#[cold]
fn refuse() -> ! {
    // A standby makes no ids, leased or not, and says so first: that is its reason (its worker
    // has no lease while it replays, and its cache may be its primary's, which pg_rewind copied).
    // SAFETY: a plain call; after recovery ends it is a read of a local flag.
    if unsafe { pg_sys::RecoveryInProgress() } {
        crate::generator::refuse_on_standby();
    }
    let registry = get();
    let snapshot = registry.map(Registry::snapshot);
    let kind = registry
        .map_or(Problem::None, |r| Problem::from_u32(r.problem_kind.load(Ordering::Acquire)));
    let (problem, hint) = match PROBLEM.get() {
        Some(settings) => (Some(settings.clone()), gucs::settings_hint()),
        None => (snapshot.as_ref().and_then(|s| s.problem.clone()), kind.hint()),
    };
    let (problem, hint) = if may_see_problems() {
        (problem, hint)
    } else {
        (
            Some(
                "the reason is in the server log, and in snowflake_stats() for members of \
                 pg_monitor"
                    .into(),
            ),
            "Ask an administrator of this server.",
        )
    };
    match snapshot {
        Some(s) if s.source == Source::Lost => lease_lost(
            s.worker_id.unwrap_or(0),
            problem.as_deref().unwrap_or("the registry leased it to another cluster"),
        ),
        Some(s) if s.worker_id.is_some() => {
            lease_ran_out(s.worker_id.unwrap_or(0), s.covered_until_ms, problem.as_deref(), hint)
        }
        _ => no_lease(
            problem.as_deref().unwrap_or("the registry's worker has not leased a worker id yet"),
            hint,
        ),
    }
}

#[cold]
#[track_caller]
fn no_lease(problem: &str, hint: &str) -> ! {
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "this server holds no worker id lease from the registry",
        hint,
    )
    .detail(sentence(problem))
    .raise()
}

#[cold]
#[track_caller]
fn lease_ran_out(worker_id: u32, covered_until_ms: i64, problem: Option<&str>, hint: &str) -> ! {
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("the registry's lease of worker id {worker_id} ran out"),
        hint,
    )
    .detail(format!(
        "It covered ids until {}, and could not be renewed since.{}",
        iso_unix(covered_until_ms),
        problem.map(|p| format!(" {}", sentence(p))).unwrap_or_default()
    ))
    .raise()
}

/// What to do once the worker id went to another cluster.
fn lost_hint() -> &'static str {
    "Restart the server: it then leases a free worker id (or, with snowflake.worker_id set, waits \
     for that one)."
}

#[cold]
#[track_caller]
fn lease_lost(worker_id: u32, why: &str) -> ! {
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("worker id {worker_id} was leased to another cluster"),
        lost_hint(),
    )
    .detail(format!(
        "This server could not renew its lease before it ran out, and the registry gave the \
         worker id to another cluster. {}",
        sentence(why)
    ))
    .raise()
}

/// Why ids run ahead of the clock, when the lease in force starts above its worker id's previous
/// holders' coverage ahead of the clock (a lease given back while that holder's ids ran ahead:
/// see `worker::release`).
fn start_above_ahead() -> Option<String> {
    let registry = get()?;
    let worker_id = registry.in_force()?;
    let start_above_ms = registry.start_above_ms.load(Ordering::Acquire);
    let ahead_ms = start_above_ms - clock::now_unix_ms();
    (ahead_ms > 0).then(|| {
        format!(
            "The registry leased worker id {worker_id} to start above {}, where the ids of its \
             previous holders end, {} ms ahead of the clock",
            iso_unix(start_above_ms),
            ahead_ms
        )
    })
}

/// The node's name: `cluster_name`, or `host:port` when that is empty.
pub fn node_name() -> String {
    // SAFETY: cluster_name is a string setting PostgreSQL keeps valid (never NULL once set up).
    let cluster_name = unsafe { pg_sys::cluster_name };
    if !cluster_name.is_null() {
        // SAFETY: see above; NUL-terminated.
        let name = unsafe { std::ffi::CStr::from_ptr(cluster_name) }.to_string_lossy();
        if !name.is_empty() {
            return name.into_owned();
        }
    }
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let host =
        if ok { String::from_utf8_lossy(&buf[..end]).into_owned() } else { "localhost".into() };
    // SAFETY: a plain read of a setting fixed at server start.
    format!("{host}:{}", unsafe { pg_sys::PostPortNumber })
}

fn may_see_problems() -> bool {
    // SAFETY: plain catalog checks of the current user, in a backend.
    unsafe {
        let user = pg_sys::GetUserId();
        pg_sys::superuser()
            || pg_sys::has_privs_of_role(user, pg_sys::Oid::from(pg_sys::ROLE_PG_MONITOR))
            || pg_sys::has_privs_of_role(user, pg_sys::Oid::from(pg_sys::ROLE_PG_READ_ALL_SETTINGS))
    }
}

/// This cluster's system identifier, which the registry knows it by.
fn system_identifier() -> u64 {
    // SAFETY: reads a value PostgreSQL set at start.
    unsafe { pg_sys::GetSystemIdentifier() }
}

/// At server start (in the postmaster): the cached lease, if it is this cluster's, for this
/// namespace, layout and worker id, and has not run out. The registry worker renews it (or
/// finds it lost) once it reaches the registry.
fn start_from_cache(registry: &Registry) {
    if PROBLEM.get().is_some() {
        return;
    }
    let lease = match cache::read(Path::new(".")) {
        Ok(Some(lease)) => lease,
        Ok(None) => return,
        Err(why) => {
            errors::report(
                Code::ERRCODE_WARNING,
                format!(
                    "pg_snowflake: the cached registry lease {} is unreadable ({why}); waiting \
                     for the registry",
                    cache::FILE_NAME
                ),
                "Nothing is needed: the registry's worker leases a worker id and writes the \
                 file again.",
            )
            .warn();
            return;
        }
    };
    // Only where it was granted: a copy of this data directory, a restore, a standby promoted on
    // another host, and a start after a reboot carry the file and are elsewhere.
    let here = identity::place();
    if mutant!(cache_place, { lease.place_check != here.check }, { false }) {
        let then = if lease.place.is_empty() {
            "0.5.0 recorded no place".to_string()
        } else {
            format!("then {}", lease.place)
        };
        errors::report(
            Code::ERRCODE_WARNING,
            format!(
                "pg_snowflake: this data directory was copied, moved or restarted after a reboot \
                 since its registry lease was cached ({then}; now {}): it makes no ids until \
                 the registry leases it a worker id",
                here.description
            ),
            "Nothing is needed where the registry is reachable. A copy that runs beside its \
             original gets a worker id of its own.",
        )
        .warn();
        return;
    }
    if lease.covered_until_ms == 0 {
        errors::log(format!(
            "pg_snowflake: worker id {} was given back to the registry at the last clean \
             shutdown: no ids until the registry leases a worker id",
            lease.worker_id
        ));
        return;
    }
    let layout = gucs::layout();
    let fits = lease.system_identifier == system_identifier()
        && lease.namespace == gucs::registry_namespace()
        && lease.layout == layout.describe()
        && gucs::worker_id_setting().is_none_or(|w| w == lease.worker_id)
        && lease.worker_id <= layout.max_worker_id();
    if !fits || lease.covered_until_ms <= clock::now_unix_ms() {
        return;
    }
    generator::get().start_with_lease(layout, lease.start_above_ms, lease.covered_until_ms);
    registry.hold(&lease, lease.expires_ms, Source::Cached);
}

extension_sql_file! { "../../../sql/registry_namespaces.sql", name = "snowflake_registry_namespaces", requires = ["own_schema"] }
extension_sql_file! { "../../../sql/registry_table.sql", name = "snowflake_registry", requires = ["own_schema"] }
extension_sql_file! { "../../../sql/registry_lease.sql", name = "snowflake_registry_lease", requires = ["snowflake_registry", "snowflake_registry_namespaces"] }
extension_sql_file! { "../../../sql/registry_compat.sql", name = "snowflake_registry_compat", requires = ["snowflake_registry_lease"] }
extension_sql_file! { "../../../sql/registry_grants.sql", name = "snowflake_registry_grants", requires = ["snowflake_registry_lease", "snowflake_registry_compat"] }
