//! `snowflake_stats()`: what the generator is doing, as jsonb built with serde.
//!
//! Every counter is written on a cold path (a renewal, a clock step, a wait) except the count of
//! ids, which each backend keeps in a plain process-local counter and adds to shared memory at
//! the end of each transaction: the hot path pays one local increment, no shared write.

use crate::layout::{self, Tick};
use crate::shared::{self, Shared};
use crate::{clock, gucs};
use pgrx::prelude::*;
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
        if let Some(s) = shared::try_get() {
            flush(s);
        }
    }
}

/// Adds this process's count to the cluster's.
pub fn flush(s: &Shared) {
    let n = LOCAL_IDS.swap(0, Ordering::Relaxed);
    if n > 0 {
        s.ids.fetch_add(n, Ordering::Relaxed);
    }
}

#[derive(Serialize)]
pub struct Stats {
    /// `snowflake.worker_id`; null while unset.
    pub worker_id: Option<u32>,
    pub layout: Layout,
    /// The last id handed out by this cluster since the server started; null before the first.
    pub last_id: Option<i64>,
    /// Ids handed out since the server started, counted at the end of each transaction.
    pub ids_since_start: u64,
    /// How far the time inside the last id is ahead of the clock now, in ms (negative: the
    /// last id is older than the clock, as it is at low traffic).
    pub ahead_of_clock_ms: i64,
    pub clock: Clock,
    pub lease: Lease,
    /// When shared memory was set up: the server's start, or its last crash recovery.
    pub since: String,
}

#[derive(Serialize)]
pub struct Layout {
    pub name: &'static str,
    pub epoch: String,
    pub time_unit_ms: u64,
    pub time_bits: u32,
    pub worker_bits: u32,
    pub sequence_bits: u32,
    /// The last moment an id can hold.
    pub ends: String,
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
    /// 1 ms naps of backends that had used their share of a millisecond past half of
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

/// ISO 8601 in UTC with milliseconds, from ms since the snowflake epoch.
fn iso(ms_since_epoch: u64) -> String {
    iso_unix(layout::EPOCH_UNIX_MS + ms_since_epoch as i64)
}

fn iso_unix(unix_ms: i64) -> String {
    let (days, ms_of_day) = (
        unix_ms.div_euclid(86_400_000),
        unix_ms.rem_euclid(86_400_000),
    );
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, ms) = (
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000,
    );
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{ms:03}Z")
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The figures of this cluster now.
pub fn collect() -> Stats {
    let s = shared::get();
    flush(s);
    let worker_id = gucs::worker_id();
    let tick = Tick(s.tick.load(Ordering::Acquire));
    let now = layout::ms_since_epoch(clock::now_unix_ms()).unwrap_or(0);
    let lease_ms = s.lease_ms.load(Ordering::Acquire);
    let mark_ms = s.mark_ms.load(Ordering::Acquire);
    Stats {
        worker_id,
        layout: Layout {
            name: "twitter",
            epoch: iso(0),
            time_unit_ms: 1,
            time_bits: layout::TIME_BITS,
            worker_bits: layout::WORKER_BITS,
            sequence_bits: layout::SEQUENCE_BITS,
            ends: iso(layout::MAX_MS),
        },
        last_id: (tick.0 != 0).then(|| tick.id(worker_id.unwrap_or(0))),
        ids_since_start: s.ids.load(Ordering::Relaxed),
        ahead_of_clock_ms: if tick.0 == 0 {
            0
        } else {
            tick.ms() as i64 - now as i64
        },
        clock: Clock {
            steps_back: s.clock_steps_back.load(Ordering::Relaxed),
            largest_step_back_ms: s.largest_step_back_ms.load(Ordering::Relaxed),
            waits_ms: s.clock_waits.load(Ordering::Relaxed),
            failures: s.clock_failures.load(Ordering::Relaxed),
            paced_ms: s.paced_waits.load(Ordering::Relaxed),
        },
        lease: Lease {
            covered_until: (lease_ms != 0).then(|| iso(lease_ms)),
            mark: (mark_ms != 0).then(|| iso(mark_ms)),
            renewals: s.renewals.load(Ordering::Relaxed),
        },
        since: iso_unix(s.started_unix_ms.load(Ordering::Relaxed) as i64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates() {
        assert_eq!(iso(0), "2010-11-04T01:42:54.657Z");
        assert_eq!(iso(layout::MAX_MS), "2080-07-10T17:30:30.208Z");
        assert_eq!(iso_unix(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_unix(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso_unix(1_577_836_800_000), "2020-01-01T00:00:00.000Z");
    }
}
