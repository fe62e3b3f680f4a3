//! The durable lease: no id is handed out unless a mark above its time unit is durable, so
//! that after a crash, a restart or a failover the generator can start above every id ever
//! handed out, whatever the clock says.
//!
//! A renewal writes a mark `LEASE_AHEAD_MS` past the ids being handed out, to WAL (flushed, and
//! acknowledged by synchronous standbys when they are configured) and to the state file. It
//! starts `HEADROOM_MS` before the lease runs out. The renewer takes a lock that only renewers
//! take, so other backends keep generating under the current lease while one renews. Under
//! steady load that is one durable write per second, whatever the id rate.

use crate::layout::Layout;
use crate::shared::{self, Shared};
use crate::state_file::{self, Mark};
use crate::{errors, gucs, sync_standby, wal};
use pgrx::pg_sys;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// How far past the ids a new mark reaches: after a crash, ids jump ahead by at most this much
/// (rounded up to whole time units of the layout, at least one).
pub const LEASE_AHEAD_MS: u64 = 1_500;
/// How long before the lease runs out the next renewal starts. 500 ms of headroom keeps callers
/// from waiting for a renewal unless one durable write takes longer than that. Renewals then
/// come every `LEASE_AHEAD_MS - HEADROOM_MS` = 1000 ms under load (one time unit, for layouts
/// whose unit is longer than 500 ms).
pub const HEADROOM_MS: u64 = 500;

/// Less than this much of the layout left draws a WARNING, once per process.
const ENDING_WARNING_MS: i64 = 365 * 86_400_000;

/// Makes sure ids up to time unit `units` are covered, renewing the lease if needed. Called by
/// the hot path once `units` reaches the renewal point; `now` is the clock in time units.
///
/// If `units` is still inside the lease, the caller renews early, but only if no other backend
/// is renewing: it never waits for the renewal lock, though once it holds the lock it writes the
/// mark (a WAL flush and an fdatasync, about 0.2 ms) and waits for the synchronous standbys like
/// any renewer. If `units` is past the lease, the caller waits for the lock and for the renewal.
#[cold]
pub fn cover(s: &Shared, layout: &Layout, units: u64, now: u64) {
    // SAFETY: a plain call; after recovery ends it is a read of a local flag.
    if unsafe { pg_sys::RecoveryInProgress() } {
        errors::standby();
    }
    if s.not_carried.load(Ordering::Relaxed) {
        errors::upgrade_mark_not_carried();
    }
    if s.layout_differs.load(Ordering::Acquire) {
        settle_layout(s, layout, now);
    }
    let (ahead, headroom) = (
        layout.units_covering(LEASE_AHEAD_MS),
        layout.units_covering(HEADROOM_MS),
    );
    let required = units >= s.lease.load(Ordering::Acquire);
    let Some(held) = RenewalLock::take(required) else {
        return;
    };
    if !required && units < s.renew_at.load(Ordering::Acquire) {
        return; // another backend renewed between the check above and taking the lock
    }
    let behind = raise_to_floor(s, layout, now);
    let need = units.max(s.floor.load(Ordering::Acquire));
    let wrote = s.mark.load(Ordering::Acquire) <= need.saturating_add(headroom);
    if wrote {
        let mark = need.max(now).saturating_add(ahead).min(layout.end_mark());
        write_mark(s, layout, mark);
    }
    let (mark, lsn) = (
        s.mark.load(Ordering::Acquire),
        s.mark_lsn.load(Ordering::Acquire),
    );
    // Nothing is reported while the lock is held: a client that does not read its socket would
    // block the report, and with it every renewal of the cluster.
    drop(held);
    if let Some((by_ms, events)) = behind {
        errors::clock_behind_recovered_mark(by_ms, events);
    }
    if wrote {
        warn_if_ending(layout, mark);
    }
    if !wrote && !required {
        return; // a renewal is on its way to being published; this id is covered already
    }
    // Published only once the synchronous standbys have the mark: a cancelled wait raises an
    // error here, the lease stays where it was, and the next caller waits for the same mark.
    sync_standby::wait_for_flush(lsn);
    s.lease.fetch_max(mark, Ordering::AcqRel);
    s.renew_at
        .fetch_max(mark.saturating_sub(headroom), Ordering::AcqRel);
}

/// The recovered mark was made with another layout. The floor, converted, keeps every new id
/// above the old ones; if that floor is not ahead of the clock by more than a lease, the
/// configured layout simply takes over (the next mark records it). Otherwise its ids made now
/// would lie below the old ones, and the generator refuses until the layout is set back or
/// reset on purpose (`reset_layout`).
#[cold]
fn settle_layout(s: &Shared, layout: &Layout, now: u64) {
    let floor = s.floor.load(Ordering::Acquire);
    if floor <= now.saturating_add(layout.units_covering(LEASE_AHEAD_MS)) {
        s.layout_differs.store(false, Ordering::Release);
        return;
    }
    // None: another backend settled it meanwhile.
    if let Some(recorded) = s.recorded_layout() {
        errors::layout_changed(layout, &recorded);
    }
}

/// `snowflake_reset_layout()`: forgets the ids made with a previous layout, on purpose, and
/// starts the configured layout from the clock. Returns whether there was anything to reset.
pub fn reset_layout(s: &Shared, layout: &Layout, now: u64) -> bool {
    // SAFETY: as in `cover`.
    if unsafe { pg_sys::RecoveryInProgress() } {
        errors::standby();
    }
    let held = RenewalLock::take(true);
    if !s.layout_differs.load(Ordering::Acquire) {
        return false;
    }
    let mark = now.min(layout.end_mark());
    let lsn = wal::log_reset(Mark {
        units: mark,
        layout: *layout,
    });
    write_state_file(s, layout, mark);
    s.floor.store(0, Ordering::Release);
    s.mark.store(mark, Ordering::Release);
    s.mark_lsn.store(lsn, Ordering::Release);
    s.layout_differs.store(false, Ordering::Release);
    drop(held);
    sync_standby::wait_for_flush(lsn);
    true
}

/// After a start or a promotion, moves the generator above the recovered mark. Returns how far
/// the clock is behind it in ms, and the backward-step count, if that is more than a lease: the
/// clock was set back across the restart, which the caller reports once it holds no lock.
fn raise_to_floor(s: &Shared, layout: &Layout, now: u64) -> Option<(u64, u64)> {
    let floor = s.floor.load(Ordering::Acquire);
    if layout.units(crate::layout::Tick(s.tick.load(Ordering::Acquire))) >= floor {
        return None;
    }
    s.tick.fetch_max(layout.tick_at(floor).0, Ordering::AcqRel);
    if floor > now.saturating_add(layout.units_covering(LEASE_AHEAD_MS)) {
        let by_ms = (floor - now) * layout.unit_ms;
        let events = s.clock_steps_back.fetch_add(1, Ordering::Relaxed) + 1;
        s.largest_step_back_ms.fetch_max(by_ms, Ordering::Relaxed);
        return Some((by_ms, events));
    }
    None
}

fn write_mark(s: &Shared, layout: &Layout, mark: u64) {
    let lsn = wal::log_mark(Mark {
        units: mark,
        layout: *layout,
    });
    write_state_file(s, layout, mark);
    s.mark.store(mark, Ordering::Release);
    s.mark_lsn.store(lsn, Ordering::Release);
    s.renewals.fetch_add(1, Ordering::Relaxed);
}

fn write_state_file(s: &Shared, layout: &Layout, units: u64) {
    write_state(
        s,
        Mark {
            units,
            layout: *layout,
        },
    );
}

fn write_state(s: &Shared, mark: Mark) {
    let sync_dir = !s.state_file_synced.load(Ordering::Acquire);
    if let Err(e) = state_file::write(Path::new("."), state_file::Loaded::Mark(mark), sync_dir) {
        errors::state_file_write_failed(&e);
    }
    s.state_file_synced.store(true, Ordering::Release);
}

/// Once per process, when a new mark lies within a year of the layout's end.
fn warn_if_ending(layout: &Layout, mark: u64) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    let left = layout
        .end_unix_ms()
        .map_or(i64::MAX, |end| end - layout.unix_ms(mark));
    if left < ENDING_WARNING_MS && !WARNED.swap(true, Ordering::Relaxed) {
        errors::layout_ending(layout);
    }
}

/// Redo of a mark record, in the startup process of a standby or of crash recovery: ids after
/// promotion or recovery start above it, also after a restart of the standby. The state file
/// keeps the mark in the layout it was written in.
pub fn replay_mark(mark: Mark) {
    let s = shared::get();
    if s.raise_floor(mark, gucs::layout()) {
        write_state(s, mark);
    }
}

/// Redo of a reset record: the primary forgot its old ids on purpose, so the floor is the new
/// mark, even below the one replayed before.
pub fn replay_reset(mark: Mark) {
    let s = shared::get();
    let layout = gucs::layout();
    write_state(s, mark);
    s.floor.store(
        mark.units_in(layout).min(layout.end_mark()),
        Ordering::Release,
    );
    s.mark.store(
        mark.units_in(layout).min(layout.end_mark()),
        Ordering::Release,
    );
    if mark.layout.same_ids(layout) {
        s.layout_differs.store(false, Ordering::Release);
    } else {
        s.note_recorded_layout(&mark.layout);
    }
}

/// The renewal lock, released on drop. On an error PostgreSQL's abort releases all LWLocks, so
/// the drop during unwinding leaves it to that.
struct RenewalLock(*mut pg_sys::LWLock);

impl RenewalLock {
    /// Waits for the lock if `wait`, else takes it only if it is free.
    fn take(wait: bool) -> Option<RenewalLock> {
        let lock = shared::renewal_lock();
        // SAFETY: the lock lives in shared memory set up at start.
        unsafe {
            if wait {
                pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
            } else if !pg_sys::LWLockConditionalAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) {
                return None;
            }
        }
        Some(RenewalLock(lock))
    }
}

impl Drop for RenewalLock {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            // SAFETY: this backend holds the lock.
            unsafe { pg_sys::LWLockRelease(self.0) };
        }
    }
}
