//! Monitoring: `snowflake_stats()`, what the generator is doing, as jsonb built with serde_json.
//!
//! Every counter is written on a cold path (a renewal, a clock step, a wait) except the count of
//! ids, which each backend keeps in a plain process-local counter and adds to shared memory at
//! the end of each transaction: the hot path pays one local increment, no shared write.

use crate::generator::Generator;
use crate::layout::Order;
use crate::text::iso_unix;
use crate::{claims, clock, generator, gucs, registry, worker_id};
use pgrx::prelude::*;
use pgrx::JsonB;
use serde_json::{json, Value};
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
    JsonB(collect())
}

/// The figures of this cluster now, as the document `snowflake_stats()` returns (the README's
/// reference lists its keys; jsonb orders them itself).
fn collect() -> Value {
    let generator = generator::get();
    flush(generator);
    let g = generator.snapshot();
    let layout = gucs::layout();
    let worker_id = worker_id::current();
    let iso = |units: u64| iso_unix(layout.unix_ms(units));
    let mut layout_json = json!({
        "name": layout.preset.name(),
        "epoch": iso_unix(layout.epoch_unix_ms),
        "time_unit_ms": layout.unit_ms,
        "time_bits": layout.time_bits,
        "worker_bits": layout.worker_bits,
        "sequence_bits": layout.sequence_bits,
        // Where the worker id sits.
        "order": match layout.order {
            Order::WorkerThenSequence => "time, worker, sequence",
            Order::SequenceThenWorker => "time, sequence, worker",
        },
        // The last moment an id can hold.
        "ends": layout.end_unix_ms().map(iso_unix),
    });
    // The layout of the ids made before, while it differs from this one and the generator has
    // not settled the change (see the README's "Changing the layout"); absent otherwise.
    if let Some(recorded) = g.recorded_layout {
        layout_json["recorded"] = recorded.describe().into();
    }
    let mut stats = json!({
        // The worker id in this server's ids: `snowflake.worker_id`, or the one leased from
        // `snowflake.registry`; null while there is none (unset and no lease held, or the
        // settings refused at start).
        "worker_id": worker_id,
        // Where it came from: `setting` (`snowflake.worker_id`), `registry`, or `address`
        // (`snowflake.worker_id_network`, with `address` below); null while there is none.
        "worker_id_from": worker_id.map(|_| {
            if crate::address::source().is_some() {
                "address"
            } else if gucs::registry().is_some() {
                "registry"
            } else {
                "setting"
            }
        }),
        "layout": layout_json,
        // The id every next id is above: the last one handed out since the server started, or a
        // floor set since (`snowflake_advance_past`, a restart's mark once an id was made); null
        // before the first.
        "last_id": (g.tick.0 != 0).then(|| layout.id(g.tick, worker_id.unwrap_or(0))),
        // Ids handed out since the server started, counted at the end of each transaction.
        "ids_since_start": g.ids,
        // How far the time inside the last id is ahead of the clock now, in ms (negative: the
        // last id is older than the clock, as it is at low traffic).
        "ahead_of_clock_ms": if g.tick.0 == 0 {
            0
        } else {
            layout.unix_ms(layout.units(g.tick)) - clock::now_unix_ms()
        },
        "clock": {
            // Backward steps of the system clock seen, including a start behind the previous
            // run.
            "steps_back": g.clock_steps_back,
            "largest_step_back_ms": g.largest_step_back_ms,
            // 1 ms naps of callers that found the ids more than `snowflake.max_drift` ahead.
            "waits_ms": g.clock_waits,
            // Calls that failed after `snowflake.drift_wait` of such naps.
            "failures": g.clock_failures,
            // 1 ms naps of callers whose slot lay in a later millisecond, past half of
            // `snowflake.max_drift` (pacing of bursts).
            "paced_ms": g.paced_waits,
        },
        "lease": {
            // Ids up to this moment are covered by a durable mark.
            "covered_until": (g.lease != 0).then(|| iso(g.lease)),
            // The newest mark written to WAL and the state file.
            "mark": (g.mark != 0).then(|| iso(g.mark)),
            // Durable writes of a new mark since the server started.
            "renewals": g.renewals,
        },
        // When shared memory was set up: the server's start, or its last crash recovery.
        "since": iso_unix(g.started_unix_ms),
    });
    // The worker-id lease from `snowflake.registry`; absent without a registry.
    // With `snowflake.worker_id_network` (else absent): the network and this server's address in
    // it, whose offset is the worker id.
    if let Some((network, address)) = crate::address::source() {
        stats["address"] = json!({ "network": network, "address": address });
    }
    if let Some(registry) = registry_stats() {
        stats["registry"] = registry;
    }
    // The last gathering of a Citus cluster's claims by this node's claims worker: when, how
    // many nodes were read, and which were not, and why; absent without
    // `snowflake.claims_database`, and before the first gathering on a Citus node.
    if let Some(claims) = claims::stats() {
        stats["claims"] = claims;
    }
    stats
}

fn registry_stats() -> Option<Value> {
    let r = registry::snapshot()?;
    let time = |ms: i64| (ms != 0).then(|| iso_unix(ms));
    Some(json!({
        // `cached` (the previous run's lease, not yet renewed), `leased`, `lost` (leased to
        // another cluster while this one was cut off: refused until restart), or `none`.
        "source": match r.source {
            registry::Source::None => "none",
            registry::Source::Cached => "cached",
            registry::Source::Leased => "leased",
            registry::Source::Lost => "lost",
        },
        // The namespace the worker id is leased in.
        "namespace": gucs::registry_namespace(),
        // This cluster, as the registry knows it.
        "holder": format!(
            "{} ({})",
            // SAFETY: reads a value PostgreSQL set at start.
            unsafe { pg_sys::GetSystemIdentifier() } as i64,
            registry::node_name()
        ),
        // This server's ids stay below this time, which the registry has recorded.
        "covered_until": time(r.covered_until_ms),
        // When the registry may give the worker id to another cluster (by its clock), as of
        // the last renewal.
        "expires": time(r.expires_ms),
        // The last successful call to the registry since start.
        "renewed": time(r.renewed_ms),
        // What went wrong last, if the last call failed (or why the lease was lost).
        "problem": r.problem,
        // The version of the libpq the registry's worker loaded (16 and later refuse to send a
        // password in clear text), null until it has.
        "libpq": (r.libpq_version != 0)
            .then(|| format!("{}.{}", r.libpq_version / 10000, r.libpq_version % 10000)),
        // Another server of this cluster that held the worker id this one asked for (a copy of
        // this data directory, or a standby promoted beside it), as the registry named it: this
        // one took a worker id of its own; null when none did.
        "copy_of": r.copy_of,
    }))
}
