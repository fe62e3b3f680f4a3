//! The hot path: one clock read and a compare-and-swap on the shared tick, drawn from by every
//! backend and parallel worker without a lock.
//!
//! Because every id of the cluster is a successful CAS on one word, ids are unique and strictly
//! increasing in the order they are handed out, across all backends. What is rare (a lease
//! renewal, a clock step, waiting for the clock) is out of line.

use crate::layout::{Advance, Layout, Pacer, Tick};
use crate::shared::{self, Shared};
use crate::{clock, errors, gucs, lease, stats};
use pgrx::pg_sys;
use std::cell::Cell;
use std::sync::atomic::Ordering;

/// A clock reading this far below the highest one seen is a backward step. Readings of
/// different backends cannot disagree by more than the clocks of two CPUs (microseconds), since a
/// suspected step is confirmed by a reading taken after loading the high-water mark.
const STEP_TOLERANCE_MS: u64 = 10;

/// The next id of the cluster. Errors if the library is not preloaded, the worker id is unset,
/// this is a standby, or the clock is too far behind.
#[inline]
pub fn next_id() -> i64 {
    let s = shared::get();
    let Some((layout, worker_id)) = gucs::generating() else {
        errors::worker_id_unset()
    };
    let id = layout.id(next_tick(s, layout), worker_id);
    stats::count_id();
    id
}

#[inline]
fn next_tick(s: &Shared, layout: &Layout) -> Tick {
    let max_drift = layout.units_in(gucs::max_drift_ms());
    let mut now = now_units(s, layout);
    let mut naps = 0;
    let mut prev = s.tick.load(Ordering::Acquire);
    loop {
        match layout.advance(Tick(prev), now, max_drift) {
            Advance::To(next) => {
                if Pacer::applies(layout, next, now, max_drift) && !paced(layout, now) {
                    s.paced_waits.fetch_add(1, Ordering::Relaxed);
                    nap_one_ms(); // this backend's share of the time unit is used up
                    now = now_units(s, layout);
                    prev = s.tick.load(Ordering::Acquire);
                    continue;
                }
                let units = layout.units(next);
                if units >= s.renew_at.load(Ordering::Acquire) {
                    lease::cover(s, layout, units, now);
                }
                match s.tick.compare_exchange_weak(
                    prev,
                    next.0,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return next,
                    Err(current) => prev = current,
                }
            }
            Advance::TooFarAhead { ahead } => {
                // `now` may be stale: read when the call began, and a backend descheduled since
                // (or retrying a contended CAS) would see the ids further ahead than they are.
                // Look at the clock again before waiting, or failing when drift_wait is 0.
                let fresh = now_units(s, layout);
                if fresh <= now {
                    nap_for_clock(s, &mut naps, ahead * layout.unit_ms);
                }
                now = now_units(s, layout);
                prev = s.tick.load(Ordering::Acquire);
            }
            Advance::Exhausted => errors::layout_exhausted(layout),
        }
    }
}

/// The clock in time units of the layout, watched for backward steps.
#[inline]
fn now_units(s: &Shared, layout: &Layout) -> u64 {
    let unix_ms = clock::now_unix_ms();
    watch_clock(s, unix_ms);
    units_at(layout, unix_ms)
}

/// The clock in time units of the layout, not watched (for callers off the hot path).
pub fn clock_units(layout: &Layout) -> u64 {
    units_at(layout, clock::now_unix_ms())
}

#[inline]
fn units_at(layout: &Layout, unix_ms: i64) -> u64 {
    match layout.units_at(unix_ms) {
        Some(units) => units,
        None => errors::clock_before_epoch(unix_ms, layout),
    }
}

/// Keeps the highest clock reading, and reports a reading far below it as a backward step.
/// One load and compare per call; a store about once per millisecond. Readings before 1970
/// count as 0.
#[inline]
fn watch_clock(s: &Shared, unix_ms: i64) {
    let now = unix_ms.max(0) as u64;
    let high = s.clock_high_ms.load(Ordering::Relaxed);
    if now > high {
        s.clock_high_ms.fetch_max(now, Ordering::Relaxed);
    } else if now + STEP_TOLERANCE_MS < high {
        clock_stepped_back(s);
    }
}

/// Confirms a suspected backward step with a fresh reading taken after the high-water mark was
/// loaded (so a backend that was merely descheduled does not report one), then reports it once:
/// the backend that lowers the mark to the new clock warns and counts.
#[cold]
fn clock_stepped_back(s: &Shared) {
    let high = s.clock_high_ms.load(Ordering::Acquire);
    let fresh = clock::now_unix_ms().max(0) as u64;
    if fresh + STEP_TOLERANCE_MS >= high {
        return;
    }
    if s.clock_high_ms
        .compare_exchange(high, fresh, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
    {
        let events = s.clock_steps_back.fetch_add(1, Ordering::Relaxed) + 1;
        s.largest_step_back_ms
            .fetch_max(high - fresh, Ordering::Relaxed);
        errors::clock_stepped_back(high - fresh, events, gucs::max_drift_ms());
    }
}

thread_local! {
    /// This backend's count of paced ids (see `layout::Pacer`).
    static PACER: Cell<Pacer> = const { Cell::new(Pacer::new()) };
}

/// Counts an id taken deep in borrowed time; `false` once this backend has used its share of
/// the clock's time unit.
#[cold]
fn paced(layout: &Layout, now: u64) -> bool {
    // SAFETY: a plain read of a global the postmaster sets before any backend starts.
    let backends = u32::try_from(unsafe { pg_sys::MaxBackends }).unwrap_or(u32::MAX);
    PACER.with(|p| {
        let mut pacer = p.get();
        let ok = pacer.take(now, Pacer::share(layout.per_unit(), backends));
        p.set(pacer);
        ok
    })
}

/// Sleeps one millisecond, holding no lock, while the next id would run more than
/// `snowflake.max_drift` ahead of the clock; fails once `snowflake.drift_wait` naps are used up.
/// Naps are counted instead of timed so that a clock that steps during the wait cannot stretch
/// or cut it.
#[cold]
fn nap_for_clock(s: &Shared, naps: &mut u64, ahead_ms: u64) {
    let limit = gucs::drift_wait_ms();
    if *naps >= limit {
        s.clock_failures.fetch_add(1, Ordering::Relaxed);
        errors::clock_too_far_behind(ahead_ms, gucs::max_drift_ms(), limit);
    }
    *naps += 1;
    s.clock_waits.fetch_add(1, Ordering::Relaxed);
    nap_one_ms();
}

/// 1 ms is the resolution of the clock: in a layout of 1 ms units, the clock then has a whole
/// sequence more to give.
fn nap_one_ms() {
    // SAFETY: a plain sleep; interrupts are served right after it.
    unsafe { pg_sys::pg_usleep(1_000) };
    pgrx::check_for_interrupts!();
}
