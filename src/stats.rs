//! Monitoring: `snowflake_stats()`, what the generator is doing, as jsonb built with serde.
//!
//! Every counter is written on a cold path (a renewal, a clock step, a wait) except the count of
//! ids, which each backend keeps in a plain process-local counter and adds to shared memory at
//! the end of each transaction: the hot path pays one local increment, no shared write.

use crate::generator::Generator;
use crate::layout::Order;
use crate::text::iso_unix;
use crate::{clock, generator, gucs, registry};
use pgrx::prelude::*;
use pgrx::JsonB;
use serde::Serialize;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

/// Ids this process handed out since its last transaction end. Per process (each backend has
/// its own copy of the static), so a relaxed load and store suffice.
static LOCAL_IDS: AtomicU64 = AtomicU64::new(0);

/// Counts one id in this process.
#[inline]
pub fn count_id() {
    LOCAL_IDS.store(LOCAL_IDS.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// Registers the end-of-transaction flush. Only call while `shared_preload_libraries` is
/// processed: backends inherit the registration from the postmaster.
pub fn init() {
    // SAFETY: a plain registration; the callback is a static function.
    unsafe { pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut()) };
}

#[pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(event: pg_sys::XactEvent::Type, _arg: *mut c_void) {
    use pg_sys::XactEvent::*;
    if matches!(
        event,
        XACT_EVENT_COMMIT
            | XACT_EVENT_ABORT
            | XACT_EVENT_PREPARE
            | XACT_EVENT_PARALLEL_COMMIT
            | XACT_EVENT_PARALLEL_ABORT
    ) {
        if let Some(generator) = generator::try_get() {
            flush(generator);
        }
    }
}

/// Adds this process's count to the cluster's.
fn flush(generator: &Generator) {
    let n = LOCAL_IDS.swap(0, Ordering::Relaxed);
    if n > 0 {
        generator.count_ids(n);
    }
}

/// What the generator is doing: worker id, layout, last id, ids since start, how far ahead of
/// the clock, clock steps and waits, the lease. Readable by `pg_monitor` (sql/privileges.sql),
/// as PostgreSQL's own monitoring functions are.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_stats() -> JsonB {
    JsonB(serde_json::to_value(collect()).expect("the stats serialize"))
}

#[derive(Serialize)]
pub struct Stats {
    /// The worker id in this server's ids: `snowflake.worker_id`, or the one leased from
    /// `snowflake.registry`; null while there is none (unset and no lease held, or the settings
    /// refused at start).
    pub worker_id: Option<u32>,
    pub layout: LayoutStats,
    /// The id every next id is above: the last one handed out since the server started, or a
    /// floor set since (`snowflake_advance_past`, a restart's mark once an id was made); null
    /// before the first.
    pub last_id: Option<i64>,
    /// Ids handed out since the server started, counted at the end of each transaction.
    pub ids_since_start: u64,
    /// How far the time inside the last id is ahead of the clock now, in ms (negative: the
    /// last id is older than the clock, as it is at low traffic).
    pub ahead_of_clock_ms: i64,
    pub clock: Clock,
    pub lease: Lease,
    /// The worker-id lease from `snowflake.registry`; absent without a registry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry: Option<RegistryStats>,
    /// When shared memory was set up: the server's start, or its last crash recovery.
    pub since: String,
}

#[derive(Serialize)]
pub struct LayoutStats {
    pub name: &'static str,
    pub epoch: String,
    pub time_unit_ms: u64,
    pub time_bits: u32,
    pub worker_bits: u32,
    pub sequence_bits: u32,
    /// Where the worker id sits.
    pub order: &'static str,
    /// The last moment an id can hold.
    pub ends: Option<String>,
    /// The layout of the ids made before, while it differs from this one and the generator has
    /// not settled the change (see the README's "Changing the layout").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<String>,
}

#[derive(Serialize)]
pub struct Clock {
    /// Backward steps of the system clock seen, including a start behind the previous run.
    pub steps_back: u64,
    pub largest_step_back_ms: u64,
    /// 1 ms naps of callers that found the ids more than `snowflake.max_drift` ahead.
    pub waits_ms: u64,
    /// Calls that failed after `snowflake.drift_wait` of such naps.
    pub failures: u64,
    /// 1 ms naps of callers whose slot lay in a later millisecond, past half of
    /// `snowflake.max_drift` (pacing of bursts).
    pub paced_ms: u64,
}

#[derive(Serialize)]
pub struct Lease {
    /// Ids up to this moment are covered by a durable mark.
    pub covered_until: Option<String>,
    /// The newest mark written to WAL and the state file.
    pub mark: Option<String>,
    /// Durable writes of a new mark since the server started.
    pub renewals: u64,
}

#[derive(Serialize)]
pub struct RegistryStats {
    /// `cached` (the previous run's lease, not yet renewed), `leased`, `lost` (leased to
    /// another cluster while this one was cut off: refused until restart), or `none`.
    pub source: &'static str,
    /// The namespace the worker id is leased in.
    pub namespace: String,
    /// This cluster, as the registry knows it.
    pub holder: String,
    /// This server's ids stay below this time, which the registry has recorded.
    pub covered_until: Option<String>,
    /// When the registry may give the worker id to another cluster (by its clock), as of the
    /// last renewal.
    pub expires: Option<String>,
    /// The last successful call to the registry since start.
    pub renewed: Option<String>,
    /// What went wrong last, if the last call failed (or why the lease was lost).
    pub problem: Option<String>,
    /// The version of the libpq the registry's worker loaded (16 and later refuse to send a
    /// password in clear text), null until it has.
    pub libpq: Option<String>,
}

fn registry_stats() -> Option<RegistryStats> {
    let r = registry::snapshot()?;
    let time = |ms: i64| (ms != 0).then(|| iso_unix(ms));
    Some(RegistryStats {
        source: match r.source {
            registry::Source::None => "none",
            registry::Source::Cached => "cached",
            registry::Source::Leased => "leased",
            registry::Source::Lost => "lost",
        },
        namespace: gucs::registry_namespace(),
        holder: format!(
            "{} ({})",
            // SAFETY: reads a value PostgreSQL set at start.
            unsafe { pg_sys::GetSystemIdentifier() } as i64,
            registry::node_name()
        ),
        covered_until: time(r.covered_until_ms),
        expires: time(r.expires_ms),
        renewed: time(r.renewed_ms),
        problem: r.problem,
        libpq: (r.libpq_version != 0)
            .then(|| format!("{}.{}", r.libpq_version / 10000, r.libpq_version % 10000)),
    })
}

/// The figures of this cluster now.
fn collect() -> Stats {
    let generator = generator::get();
    flush(generator);
    let g = generator.snapshot();
    let layout = gucs::layout();
    let worker_id = registry::worker_id();
    let now_ms = clock::now_unix_ms();
    let iso = |units: u64| iso_unix(layout.unix_ms(units));
    Stats {
        worker_id,
        layout: LayoutStats {
            name: layout.preset.name(),
            epoch: iso_unix(layout.epoch_unix_ms),
            time_unit_ms: layout.unit_ms,
            time_bits: layout.time_bits,
            worker_bits: layout.worker_bits,
            sequence_bits: layout.sequence_bits,
            order: match layout.order {
                Order::WorkerThenSequence => "time, worker, sequence",
                Order::SequenceThenWorker => "time, sequence, worker",
            },
            ends: layout.end_unix_ms().map(iso_unix),
            recorded: g.recorded_layout.map(|l| l.describe()),
        },
        last_id: (g.tick.0 != 0).then(|| layout.id(g.tick, worker_id.unwrap_or(0))),
        ids_since_start: g.ids,
        ahead_of_clock_ms: if g.tick.0 == 0 {
            0
        } else {
            layout.unix_ms(layout.units(g.tick)) - now_ms
        },
        clock: Clock {
            steps_back: g.clock_steps_back,
            largest_step_back_ms: g.largest_step_back_ms,
            waits_ms: g.clock_waits,
            failures: g.clock_failures,
            paced_ms: g.paced_waits,
        },
        lease: Lease {
            covered_until: (g.lease != 0).then(|| iso(g.lease)),
            mark: (g.mark != 0).then(|| iso(g.mark)),
            renewals: g.renewals,
        },
        registry: registry_stats(),
        since: iso_unix(g.started_unix_ms),
    }
}
