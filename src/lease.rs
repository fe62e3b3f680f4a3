//! The durable lease: no id is handed out unless a mark above its millisecond is durable, so
//! that after a crash, a restart or a failover the generator can start above every id ever
//! handed out, whatever the clock says.
//!
//! A renewal writes a mark `LEASE_AHEAD_MS` past the ids being handed out, to WAL (flushed, and
//! acknowledged by synchronous standbys when they are configured) and to the state file. It
//! starts `HEADROOM_MS` before the lease runs out. The renewer takes a lock that only renewers
//! take, so other backends keep generating under the current lease while one renews. Under
//! steady load that is one durable write per second, whatever the id rate.

use crate::layout::{Tick, END_MARK};
use crate::shared::{self, Shared};
use crate::{errors, state_file, sync_standby, wal};
use pgrx::pg_sys;
use std::path::Path;
use std::sync::atomic::Ordering;

/// How far past the ids a new mark reaches: after a crash, ids jump ahead by at most this much.
pub const LEASE_AHEAD_MS: u64 = 1_500;
/// How long before the lease runs out the next renewal starts. 500 ms of headroom keeps callers
/// from waiting for a renewal unless one durable write takes longer than that. Renewals then
/// come every `LEASE_AHEAD_MS - HEADROOM_MS` = 1000 ms under load.
pub const HEADROOM_MS: u64 = 500;

/// Makes sure ids up to millisecond `ms` are covered, renewing the lease if needed. Called by
/// the hot path once `ms` reaches the renewal point.
///
/// If `ms` is still inside the lease, the caller renews early, but only if no other backend is
/// renewing: it never waits for the renewal lock, though once it holds the lock it writes the
/// mark (a WAL flush and an fdatasync, about 0.2 ms) and waits for the synchronous standbys like
/// any renewer. If `ms` is past the lease, the caller waits for the lock and for the renewal.
#[cold]
pub fn cover(s: &Shared, ms: u64, now: u64) {
    // SAFETY: a plain call; after recovery ends it is a read of a local flag.
    if unsafe { pg_sys::RecoveryInProgress() } {
        errors::standby();
    }
    if s.not_carried.load(Ordering::Relaxed) {
        errors::upgrade_mark_not_carried();
    }
    let required = ms >= s.lease_ms.load(Ordering::Acquire);
    let Some(held) = RenewalLock::take(required) else {
        return;
    };
    if !required && ms < s.renew_at_ms.load(Ordering::Acquire) {
        return; // another backend renewed between the check above and taking the lock
    }
    let behind = raise_to_floor(s, now);
    let need = ms.max(s.floor_ms.load(Ordering::Acquire));
    let wrote = s.mark_ms.load(Ordering::Acquire) <= need.saturating_add(HEADROOM_MS);
    if wrote {
        let mark = need.max(now).saturating_add(LEASE_AHEAD_MS).min(END_MARK);
        write_mark(s, mark);
    }
    let (mark, lsn) = (
        s.mark_ms.load(Ordering::Acquire),
        s.mark_lsn.load(Ordering::Acquire),
    );
    // Nothing is reported while the lock is held: a client that does not read its socket would
    // block the report, and with it every renewal of the cluster.
    drop(held);
    if let Some((by_ms, events)) = behind {
        errors::clock_behind_recovered_mark(by_ms, events);
    }
    if !wrote && !required {
        return; // a renewal is on its way to being published; this id is covered already
    }
    // Published only once the synchronous standbys have the mark: a cancelled wait raises an
    // error here, the lease stays where it was, and the next caller waits for the same mark.
    sync_standby::wait_for_flush(lsn);
    s.lease_ms.fetch_max(mark, Ordering::AcqRel);
    s.renew_at_ms
        .fetch_max(mark.saturating_sub(HEADROOM_MS), Ordering::AcqRel);
}

/// After a start or a promotion, moves the generator above the recovered mark. Returns how far
/// the clock is behind it, and the backward-step count, if that is more than a lease: the clock
/// was set back across the restart, which the caller reports once it holds no lock.
fn raise_to_floor(s: &Shared, now: u64) -> Option<(u64, u64)> {
    let floor = s.floor_ms.load(Ordering::Acquire);
    if Tick(s.tick.load(Ordering::Acquire)).ms() >= floor {
        return None;
    }
    s.tick.fetch_max(Tick::at_ms(floor).0, Ordering::AcqRel);
    if floor > now.saturating_add(LEASE_AHEAD_MS) {
        let events = s.clock_steps_back.fetch_add(1, Ordering::Relaxed) + 1;
        s.largest_step_back_ms
            .fetch_max(floor - now, Ordering::Relaxed);
        return Some((floor - now, events));
    }
    None
}

fn write_mark(s: &Shared, mark: u64) {
    let lsn = wal::log_mark(mark);
    write_state_file(s, mark);
    s.mark_ms.store(mark, Ordering::Release);
    s.mark_lsn.store(lsn, Ordering::Release);
    s.renewals.fetch_add(1, Ordering::Relaxed);
}

fn write_state_file(s: &Shared, mark: u64) {
    let sync_dir = !s.state_file_synced.load(Ordering::Acquire);
    if let Err(e) = state_file::write(Path::new("."), state_file::Loaded::Mark(mark), sync_dir) {
        errors::state_file_write_failed(&e);
    }
    s.state_file_synced.store(true, Ordering::Release);
}

/// Redo of a mark record, in the startup process of a standby or of crash recovery: ids after
/// promotion or recovery start above it, also after a restart of the standby.
pub fn replay_mark(mark: u64) {
    let s = shared::get();
    if mark > s.floor_ms.load(Ordering::Acquire) {
        write_state_file(s, mark);
        s.floor_ms.store(mark, Ordering::Release);
        s.mark_ms.fetch_max(mark, Ordering::AcqRel);
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
