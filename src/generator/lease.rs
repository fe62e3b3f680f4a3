//! The durable lease (rules 2 to 4 of the generator): no id is handed out unless a mark above
//! its time unit is durable, so that after a crash, a restart or a failover the generator can
//! start above every id ever handed out, whatever the clock says.
//!
//! A renewal writes a mark `LEASE_AHEAD_MS` past the ids being handed out, to WAL (flushed, and
//! acknowledged by synchronous standbys when they are configured) and to the state file and its
//! copy. It
//! starts `HEADROOM_MS` before the lease runs out. The renewer takes a lock that only renewers
//! take, so other backends keep generating under the current lease while one renews. Under
//! steady load that is one durable write per second, whatever the id rate.

use super::problems;
use super::renewal_lock::RenewalLock;
use super::{clock_units, write_failure, Generator};
use crate::layout::{Layout, Tick};
use crate::mark::Mark;
use crate::state_file::{self, Contents, WriteError};
use crate::{decode, gucs, sync_standby, wal};
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

impl Generator {
    /// Makes sure ids up to time unit `units` are covered, renewing the lease if needed. Called
    /// by the hot path once `units` reaches the renewal point; `now` is the clock in time units.
    ///
    /// If `units` is still inside the lease, the caller renews early, but only if no other
    /// backend is renewing: it never waits for the renewal lock, though once it holds the lock
    /// it writes the mark (a WAL flush and four fsyncs: 14 ms on the ext4 disk of the 2-core
    /// test machine, 300 forced renewals in 4.23 s) and waits for the synchronous standbys like
    /// any renewer. If `units` is past the
    /// lease, the caller waits for the lock, in a wait that a cancel or a terminate ends (see
    /// `renewal_lock`), and for the renewal.
    #[cold]
    pub(super) fn cover(&self, layout: &Layout, units: u64, now: u64) {
        refuse_on_standby();
        let ceiling =
            mutant!(registry_ceiling, { self.ceiling.load(Ordering::Acquire) }, { u64::MAX });
        if units >= ceiling {
            refuse_beyond_ceiling();
        }
        if mutant!(not_carried, { self.not_carried.load(Ordering::Relaxed) }, { false }) {
            problems::upgrade_mark_not_carried();
        }
        if self.mark_lost.load(Ordering::Acquire) {
            problems::state_file_lost();
        }
        if mutant!(layout_refusal, { self.layout_differs.load(Ordering::Acquire) }, { false }) {
            self.settle_layout(layout, now);
        }
        if let Some(why) = mutant!(address_gone, { crate::address::gone() }, { None::<String> }) {
            problems::address_gone(&why);
        }
        let (ahead, headroom) =
            (layout.units_covering(LEASE_AHEAD_MS), layout.units_covering(HEADROOM_MS));
        let required = units >= self.lease.load(Ordering::Acquire);
        let held = if required {
            RenewalLock::wait().unwrap_or_else(|_| problems::renewal_wait_stopped())
        } else {
            match RenewalLock::try_take() {
                Some(held) => held,
                None => return,
            }
        };
        if !required && units < self.renew_at.load(Ordering::Acquire) {
            return; // another backend renewed between the check above and taking the lock
        }
        // Read again under the lock: a lease given back closes the ceiling, then takes the lock
        // to read the newest mark (`close_for_release`); a renewer that read the open ceiling
        // before must not write a mark past that bound once it holds the lock.
        let ceiling =
            mutant!(registry_ceiling, { self.ceiling.load(Ordering::Acquire).min(ceiling) }, {
                u64::MAX
            });
        if units >= ceiling {
            drop(held);
            refuse_beyond_ceiling();
        }
        let behind = self.raise_to_floor(layout, now);
        let need = units.max(self.floor.load(Ordering::Acquire));
        // Near the ceiling, the mark stops at it: no more writes until the ceiling moves.
        let written = self.mark.load(Ordering::Acquire);
        let wrote = written <= need.saturating_add(headroom) && written < ceiling;
        let failed = if wrote {
            let mark = need.max(now).saturating_add(ahead).min(layout.end_mark()).min(ceiling);
            mutant!(durable_mark, { self.write_mark(layout, mark).err() }, {
                self.mark.store(mark, Ordering::Release);
                None
            })
        } else {
            None
        };
        let (mark, lsn) =
            (self.mark.load(Ordering::Acquire), self.mark_lsn.load(Ordering::Acquire));
        // Nothing is reported while the lock is held, not even the failure: a client that does
        // not read its socket would block the report, and with it every renewal of the cluster.
        drop(held);
        if let Some((by_ms, events)) = behind {
            problems::clock_behind_recovered_mark(by_ms, events);
        }
        if let Some((e, retry_in_ms)) = failed {
            if required {
                problems::state_file_write_failed(&e, Some(retry_in_ms));
            }
            return; // an early renewal: the lease in force still covers this id
        }
        if wrote {
            warn_if_ending(layout, mark);
        }
        if !wrote && !required {
            return; // a renewal is on its way to being published; this id is covered already
        }
        // Published only once the synchronous standbys have the mark: a cancelled wait raises
        // an error here, the lease stays where it was, and the next caller waits for the same
        // mark.
        mutant!(
            sync_cancel,
            {
                sync_standby::wait_for_flush(lsn);
            },
            {
                let _ = std::panic::catch_unwind(|| sync_standby::wait_for_flush(lsn));
            }
        );
        self.publish(mark, headroom);
    }

    /// Makes `mark` the lease, with the renewal point `headroom` before it. Only ever raises
    /// them: a slower renewer never takes back what a faster one published.
    fn publish(&self, mark: u64, headroom: u64) {
        self.lease.fetch_max(mark, Ordering::AcqRel);
        self.renew_at.fetch_max(mark.saturating_sub(headroom), Ordering::AcqRel);
    }

    /// The recovered mark was made with another layout. The floor, converted, keeps every new id
    /// above the old ones; if that floor is not ahead of the clock by more than a lease, the
    /// configured layout simply takes over (the next mark records it). Otherwise its ids made
    /// now would lie below the old ones, and the generator refuses until the layout is set back
    /// or reset on purpose (`reset_layout`).
    #[cold]
    fn settle_layout(&self, layout: &Layout, now: u64) {
        let floor = self.floor.load(Ordering::Acquire);
        if floor <= now.saturating_add(layout.units_covering(LEASE_AHEAD_MS)) {
            self.layout_differs.store(false, Ordering::Release);
            return;
        }
        // None: another backend settled it meanwhile.
        if let Some(recorded) = self.recorded_layout() {
            problems::layout_changed(layout, &recorded);
        }
    }

    /// `snowflake_reset_layout()`: forgets the ids made with a previous layout, on purpose, and
    /// starts the configured layout from the clock. Returns whether there was anything to reset.
    pub fn reset_layout(&self, layout: &Layout) -> bool {
        refuse_on_standby();
        let now = clock_units(layout);
        let held = RenewalLock::wait().unwrap_or_else(|_| problems::renewal_wait_stopped());
        if !self.layout_differs.load(Ordering::Acquire) {
            return false;
        }
        let units = now.min(layout.end_mark());
        let mark = Mark { units, layout: *layout };
        // The state file first, where it can still fail without having changed anything (a full
        // disk, permissions: 58030). Then the reset goes to WAL, and from there to every
        // standby, so the primary must follow: putting the file in place and forgetting the old
        // floor form a critical section, where a failure is a PANIC, and crash recovery replays
        // the reset (and writes the file) before the server accepts a session. Primary and
        // standbys therefore never disagree about whether the reset happened.
        let prepared = state_file::prepare(Path::new("."), Contents::Mark(mark))
            .unwrap_or_else(|e| problems::state_file_write_failed(&e, None));
        let lsn = wal::log_reset(mark);
        {
            let _critical = CriticalSection::enter();
            if let Err(e) = prepared.replace() {
                problems::state_file_write_failed(&e, None);
            }
            self.floor.store(0, Ordering::Release);
            self.mark.store(units, Ordering::Release);
            self.mark_lsn.store(lsn, Ordering::Release);
            self.layout_differs.store(false, Ordering::Release);
        }
        drop(held);
        sync_standby::wait_for_flush(lsn);
        true
    }

    /// `snowflake_advance_past(id)`: every id handed out after this returns is above `id`, also
    /// after a crash right after it: the mark goes to WAL and the state file (and the
    /// synchronous standbys) before the tick moves.
    pub fn advance_past(&self, layout: &Layout, id: i64) {
        let Ok(unsigned) = u64::try_from(id) else { decode::negative_id(id) };
        // From the next time unit on: an id of another worker in the same unit could sort
        // either side of ours. Read through the id's value, not its fields, so that an id of any
        // layout (one made before a layout change, or by another system) is passed.
        let units = layout.units_from_id(unsigned.saturating_add(1));
        if units > layout.max_units() {
            problems::layout_exhausted(layout);
        }
        let now = clock_units(layout);
        let max_drift = layout.units_in(gucs::max_drift_ms());
        if units > now + max_drift {
            let ahead_ms = (units - now) * layout.unit_ms;
            problems::advance_too_far(id, ahead_ms, gucs::max_drift_ms());
        }
        if self.mark_lost.load(Ordering::Acquire) {
            self.settle_lost_mark(units);
        }
        if mutant!(floor_durable, { units >= self.lease.load(Ordering::Acquire) }, { false }) {
            self.cover(layout, units, now);
        }
        // The id before the first one of unit `units`, or of the clock's if that is later (the
        // next id would be there anyway; the tick then stays a recent id, as stats show it): the
        // next id lands in `units` or later, also if the clock steps back right after this.
        let start = units.max(now).min(layout.max_units());
        self.tick.fetch_max(layout.tick_at(start).0.saturating_sub(1), Ordering::AcqRel);
    }

    /// The ids made before the last start are unknown (the state file was lost, see
    /// `state_file::recover`), and an operator vouches with `snowflake_advance_past()` that
    /// none lies at or above time unit `units`: the floor goes there, under the renewal lock,
    /// before ids are allowed again. The renewal that follows in `advance_past` writes it
    /// durably, to the state file and its copy; should that fail, the next start refuses again.
    fn settle_lost_mark(&self, units: u64) {
        let _held = RenewalLock::wait().unwrap_or_else(|_| problems::renewal_wait_stopped());
        self.floor.fetch_max(units, Ordering::AcqRel);
        self.mark.fetch_max(units, Ordering::AcqRel);
        self.mark_lost.store(false, Ordering::Release);
    }

    /// After a start or a promotion, moves the generator above the floor (rule 4). Returns how
    /// far the clock is behind it in ms, and the backward-step count, if that is more than a
    /// lease: the clock was set back across the restart, which the caller reports once it holds
    /// no lock.
    fn raise_to_floor(&self, layout: &Layout, now: u64) -> Option<(u64, u64)> {
        let floor = self.floor.load(Ordering::Acquire);
        if layout.units(Tick(self.tick.load(Ordering::Acquire))) >= floor {
            return None;
        }
        self.tick.fetch_max(layout.tick_at(floor).0, Ordering::AcqRel);
        if floor > now.saturating_add(layout.units_covering(LEASE_AHEAD_MS))
            && floor != self.floor_on_purpose.load(Ordering::Acquire)
        {
            let by_ms = (floor - now) * layout.unit_ms;
            let events = self.counters.step_back(by_ms);
            return Some((by_ms, events));
        }
        None
    }

    /// Writes a new mark durably (rule 3, first half): the state file and its copy prepared
    /// beside them (written and synced), the WAL record (flushed), then both put in place
    /// (renamed, their directories synced). The lease is published only after all of it (in
    /// `cover`). A file that cannot be written fails the call (58030) before anything reaches
    /// WAL. Should a rename or a sync fail once the record is in WAL, the call fails too, and the
    /// lease stays where it was: a mark in WAL that the files lack only raises a floor after a
    /// crash, which is safe. After a failure the disk is tried again only once a second (see
    /// `write_failure`); the calls in between that need a new lease fail at once with the same
    /// error, and neither touch the disk nor write WAL (a call whose id the lease in force still
    /// covers does not fail). Returns the failure, and in how many ms the next try comes.
    fn write_mark(&self, layout: &Layout, units: u64) -> Result<(), (WriteError, u64)> {
        let mark = Mark { units, layout: *layout };
        mutant!(
            publish_early,
            {
                self.write_failure.may_write()?;
            },
            {
                self.publish(units, layout.units_covering(HEADROOM_MS));
                self.write_failure.may_write()?;
            }
        );
        let result = write_durably(mark);
        self.write_failure.note(&result);
        let lsn = result.map_err(|e| (e, write_failure::RETRY_MS))?;
        self.mark.store(units, Ordering::Release);
        self.mark_lsn.store(lsn, Ordering::Release);
        self.counters.renewals.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Redo of a mark record, in the startup process of a standby or of crash recovery: ids
    /// after promotion or recovery start above it, also after a restart of the standby. The
    /// state file keeps the mark in the layout it was written in. A replayed mark also settles
    /// a lost state file: recovery replays WAL to its end, where the newest mark is, and every
    /// id handed out lies below the newest mark.
    pub fn replay_mark(&self, mark: Mark) {
        if self.raise_floor(mark, gucs::layout()) || self.mark_lost.load(Ordering::Acquire) {
            replay_state_file(mark);
        }
        self.mark_lost.store(false, Ordering::Release);
    }

    /// Redo of a reset record: the primary forgot its old ids on purpose, so the floor is the
    /// new mark, even below the one replayed before.
    pub fn replay_reset(&self, mark: Mark) {
        let layout = gucs::layout();
        replay_state_file(mark);
        self.mark_lost.store(false, Ordering::Release);
        let units = mark.units_in(layout).min(layout.end_mark());
        self.floor.store(units, Ordering::Release);
        self.mark.store(units, Ordering::Release);
        if mark.layout.same_ids(layout) {
            self.layout_differs.store(false, Ordering::Release);
        } else {
            self.note_recorded_layout(&mark.layout);
        }
    }
}

/// What refuses ids beyond the ceiling: the registry's reason (see `registry`), set once at
/// start.
static CEILING_REFUSAL: std::sync::OnceLock<fn() -> !> = std::sync::OnceLock::new();

/// Sets what `cover` raises when an id would reach the ceiling. Only call from `_PG_init`.
pub fn on_ceiling(refuse: fn() -> !) {
    let _ = CEILING_REFUSAL.set(refuse);
}

#[cold]
fn refuse_beyond_ceiling() -> ! {
    match CEILING_REFUSAL.get() {
        Some(refuse) => refuse(),
        None => gucs::worker_id_unset(),
    }
}

impl Generator {
    /// At server start (in the postmaster, before any backend exists): ids start above Unix ms
    /// `ms`, ahead of the clock on purpose (see `address`), which is no clock step.
    pub fn floor_ahead_on_purpose(&self, layout: &Layout, ms: i64) {
        let floor = units_above(layout, ms);
        if floor > self.floor.load(Ordering::Acquire) {
            self.floor.store(floor, Ordering::Release);
            self.floor_on_purpose.store(floor, Ordering::Release);
        }
    }

    /// With a registry, at server start (in the postmaster, before any backend exists, so
    /// without a lock): the cached lease's floor and ceiling, in Unix ms.
    pub fn start_with_lease(&self, layout: &Layout, start_above_ms: i64, until_ms: i64) {
        let floor = units_above(layout, start_above_ms);
        self.floor.fetch_max(floor, Ordering::AcqRel);
        self.mark.fetch_max(floor, Ordering::AcqRel);
        self.ceiling.store(units_below(layout, until_ms), Ordering::Release);
    }

    /// A lease from the registry: ids above `start_above_ms` (the coverage of the worker id's
    /// previous holders), below `until_ms`. The floor moves under the renewal lock with the tick
    /// (rule 4), before the ceiling opens. The registry's worker waits for a renewal in
    /// progress, but leaves that wait when it is asked to stop: then nothing changes, and this
    /// returns false.
    pub fn lease_from_registry(&self, layout: &Layout, start_above_ms: i64, until_ms: i64) -> bool {
        let floor = mutant!(registry_floor, { units_above(layout, start_above_ms) }, { 0 });
        if floor > self.floor.load(Ordering::Acquire) {
            let Ok(_held) = RenewalLock::wait() else {
                return false;
            };
            self.floor.fetch_max(floor, Ordering::AcqRel);
            self.mark.fetch_max(floor, Ordering::AcqRel);
            self.tick.fetch_max(layout.tick_at(floor.min(layout.end_mark())).0, Ordering::AcqRel);
        }
        // Only raised: after a backward clock step a renewal asks for less than the registry
        // already recorded, which stays usable.
        self.ceiling.fetch_max(units_below(layout, until_ms), Ordering::AcqRel);
        true
    }

    /// At a clean shutdown, before the registry's lease is given back: no id from now on, and
    /// the time (Unix ms) below which every id this data directory made lies, which the
    /// registry keeps as the worker id's coverage for its next holder: the newest mark (no id
    /// reaches it, rule 2), the floor (ids of earlier starts in place) and the tick, read under
    /// the renewal lock after the ceiling closed, so that no renewal raises the mark past it.
    /// `None` (nothing is given back, and the lease runs out as after a crash) while the ids
    /// before this start are unknown (a lost or uncarried state file), or while a renewal holds
    /// the lock for longer than `patience` (a stalled disk): a shutdown does not wait on it.
    pub fn close_for_release(&self, layout: &Layout, patience: std::time::Duration) -> Option<i64> {
        self.close_ceiling();
        if self.mark_lost.load(Ordering::Acquire) || self.not_carried.load(Ordering::Acquire) {
            return None;
        }
        let deadline = crate::clock::monotonic_ms() + patience.as_millis() as u64;
        let _held = loop {
            if let Some(held) = RenewalLock::try_take() {
                break held;
            }
            if crate::clock::monotonic_ms() >= deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        let tick_units = layout.units(Tick(self.tick.load(Ordering::Acquire))).saturating_add(1);
        let bound = mutant!(
            release_bound,
            {
                self.mark
                    .load(Ordering::Acquire)
                    .max(self.floor.load(Ordering::Acquire))
                    .max(tick_units)
            },
            { 0 }
        );
        Some(layout.unix_ms(bound))
    }

    /// The registry gave this cluster's worker id to another: no id from now on. The renewal
    /// point drops to 0 so that the next call meets the ceiling at once instead of using up the
    /// lease it has (which would still be unique: the other cluster starts above it).
    pub fn close_ceiling(&self) {
        self.ceiling.store(0, Ordering::Release);
        self.renew_at.store(0, Ordering::Release);
    }
}

/// The first time unit all of whose ids lie above Unix ms `ms`.
fn units_above(layout: &Layout, ms: i64) -> u64 {
    layout.units_at(ms).map_or(0, |units| units.saturating_add(1)).min(layout.end_mark())
}

/// The last time unit all of whose ids lie below Unix ms `ms` (0 before the epoch).
fn units_below(layout: &Layout, ms: i64) -> u64 {
    layout.units_at(ms).unwrap_or(0)
}

/// The mark in the state file and its copy, and in WAL; returns the end of the WAL record.
fn write_durably(mark: Mark) -> Result<pg_sys::XLogRecPtr, WriteError> {
    let (prepared, lsn) = mutant!(
        state_file_first,
        {
            let prepared = state_file::prepare(Path::new("."), Contents::Mark(mark))?;
            (prepared, wal::log_mark(mark))
        },
        {
            let lsn = wal::log_mark(mark);
            (state_file::prepare(Path::new("."), Contents::Mark(mark))?, lsn)
        }
    );
    mutant!(
        state_file_errors,
        {
            prepared.replace()?;
        },
        {
            let _ = prepared.replace();
        }
    );
    Ok(lsn)
}

/// In redo, the record's mark must be in the state file before recovery moves on: a restart
/// point past the record would otherwise leave the mark nowhere. If the file cannot be written,
/// recovery stops (FATAL, and the server with it) and replays the record again at the next
/// start, once the disk is fixed; it never goes on without the mark.
fn replay_state_file(mark: Mark) {
    if let Err(e) = state_file::write(Path::new("."), Contents::Mark(mark)) {
        problems::state_file_write_failed_in_recovery(&e);
    }
}

/// PostgreSQL's critical section (START_CRIT_SECTION): an error inside it is a PANIC, for
/// changes that must happen whole once WAL has them.
struct CriticalSection;

impl CriticalSection {
    fn enter() -> CriticalSection {
        // SAFETY: a counter of this process, as START_CRIT_SECTION increments it.
        unsafe { pg_sys::CritSectionCount += 1 };
        CriticalSection
    }
}

impl Drop for CriticalSection {
    fn drop(&mut self) {
        // pgrx raises an ERROR as a Rust panic that unwinds to the function's boundary, where
        // PostgreSQL reports it: the count must still be up then, so that it is a PANIC.
        if !std::thread::panicking() {
            // SAFETY: as END_CRIT_SECTION.
            unsafe { pg_sys::CritSectionCount -= 1 };
        }
    }
}

/// A standby shares its worker id with its primary, which would not know the ids it made.
fn refuse_on_standby() {
    // SAFETY: a plain call; after recovery ends it is a read of a local flag.
    if mutant!(standby_refusal, { unsafe { pg_sys::RecoveryInProgress() } }, { false }) {
        problems::standby();
    }
}

/// Once per process, when a new mark lies within a year of the layout's end.
fn warn_if_ending(layout: &Layout, mark: u64) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    let left = layout.end_unix_ms().map_or(i64::MAX, |end| end - layout.unix_ms(mark));
    if left < ENDING_WARNING_MS && !WARNED.swap(true, Ordering::Relaxed) {
        problems::layout_ending(layout);
    }
}
