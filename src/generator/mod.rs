//! The generator of a cluster: one [`Generator`] in shared memory, drawn from by every backend
//! and parallel worker without a lock, and the one owner of the rules that make its ids safe.
//!
//! # Glossary
//! - **time unit**: the layout's step of time (1 ms for `twitter`, 10 ms for `sonyflake`); the
//!   clock and every bound below are counted in them, since the layout's epoch.
//! - **tick**: an id without its worker bits, `units << sequence_bits | sequence` (see
//!   `layout`): the one counter all backends advance. Ids of this cluster are ticks in order.
//! - **mark**: a time unit written durably (a WAL record, flushed, and the state file and its
//!   copy) that no id has reached yet. Renewals write one about `LEASE_AHEAD_MS` past the ids.
//! - **lease**: the time unit below which ids may be handed out: the newest mark that is
//!   durable everywhere it must be (also on the synchronous standbys), published.
//! - **renewal point**: the lease minus the headroom: an id that reaches it starts the next
//!   renewal, so that the lease is renewed before ids need it.
//! - **floor**: a mark the generator must start above: recovered at start from the state file
//!   (or its copy), raised by WAL replay, or set by `snowflake_advance_past()`.
//!
//! # The rules
//! 1. The tick only rises: it moves by compare-and-swap or `fetch_max`, never by a store.
//! 2. No id at or above the lease is handed out: an id that reaches the renewal point renews
//!    the lease first ([`Generator::cover`]).
//! 3. A mark is durable before the lease reaches it: the state file and its copy written and
//!    synced beside them, the WAL record flushed, both files put in place, the synchronous
//!    standbys, then publication.
//! 4. Ids after a start, a promotion or `snowflake_advance_past()` are above the floor: the
//!    tick is raised to it under the renewal lock, before the first id of the new lease.
//! 5. No mark reaches the ceiling: the time a worker-id lease from the registry covers (see
//!    `registry`), or no limit without a registry.
//!
//! The fields are private to this module and its children (`lease`), whose methods are the only
//! ways to change them. The hot path (`next_tick`) is one clock read and one compare-and-swap;
//! what is rare (a renewal, a clock step, a wait) is out of line.

mod lease;
mod problems;
mod renewal_lock;
mod shmem;
mod write_failure;

pub use lease::on_ceiling;
pub use problems::on_ahead;
pub use problems::standby as refuse_on_standby;
pub use shmem::{get, init, try_get};

use crate::layout::{Advance, Layout, Tick};
use crate::mark::{self, Mark};
use crate::wait_event::{self, Event};
use crate::{clock, gucs, pacing, state_file};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A clock reading this far below the highest one seen is a backward step. Readings of
/// different backends cannot disagree by more than the clocks of two CPUs (microseconds), since a
/// suspected step is confirmed by a reading taken after loading the high-water mark.
const STEP_TOLERANCE_MS: u64 = 10;

/// Everything is an atomic: the hot path takes no lock. The first cache line holds the three
/// fields every call reads (and `tick`, which every call writes); the second holds what a
/// renewal writes, about once a second, so that a renewal does not take the hot line away from
/// the other CPUs.
///
/// Times are in time units of the configured layout, except the clock readings, which are in
/// milliseconds since 1970 whatever the layout.
#[repr(C, align(64))]
pub struct Generator {
    /// The last tick handed out.
    tick: AtomicU64,
    /// The highest clock reading seen, in Unix ms: a reading far below it is a backward clock
    /// step. Written about once a millisecond.
    clock_high_ms: AtomicU64,
    /// The renewal point: ids below this time unit need no lease work.
    renew_at: AtomicU64,
    _end_of_hot_line: [u64; 5],

    /// The next pacing slot, counted as ticks are (see `pacing`): read and written only by
    /// callers deep in borrowed time.
    pace: AtomicU64,
    /// Callers that wait for a pacing slot, or take one, now (see `Waiting`).
    pace_waiting: AtomicU64,

    /// The lease. 0 until the first renewal after start or promotion.
    lease: AtomicU64,
    /// The newest mark written; ahead of `lease` while its renewer waits for synchronous
    /// standbys. Written under the renewal lock by renewers, and raised by WAL replay in the
    /// startup process, when no backend can renew.
    mark: AtomicU64,
    /// End of the WAL record of `mark`.
    mark_lsn: AtomicU64,
    /// The floor, in the configured layout.
    floor: AtomicU64,
    /// The state file says this cluster was made by pg_upgrade without the old cluster's mark:
    /// no lease is granted until an operator settles it (see `upgrade`).
    not_carried: AtomicBool,
    /// The state file was lost and its copy with it, although this data directory handed out
    /// ids (`state_file::Contents::Lost`): no lease is granted until `snowflake_advance_past()`
    /// or a replayed mark says where ids may go on.
    mark_lost: AtomicBool,
    /// The recovered mark was made with another layout than the configured one (kept in
    /// `recorded_layout`): the first renewal checks that the configured layout's ids can
    /// continue above the old ones (see `Generator::settle_layout`).
    layout_differs: AtomicBool,
    /// That layout, as `mark::layout_to_bytes` writes it, in two words.
    recorded_layout: [AtomicU64; 2],
    /// A floor set ahead of the clock on purpose at start (the reuse rule of a worker id from
    /// the server's address, see `address`): reaching it is not a clock step back.
    floor_on_purpose: AtomicU64,
    /// Rule 5: the time unit no mark may reach. `u64::MAX` without a registry; with one, the
    /// end of the registry's lease, 0 until there is one and after it was lost.
    ceiling: AtomicU64,

    /// The last durable write of a mark that failed, and when to try the disk again.
    write_failure: write_failure::WriteFailure,

    /// Counters for `snowflake_stats()`, all written on cold paths.
    counters: Counters,
}

const _: () = assert!(std::mem::offset_of!(Generator, pace) == 64);

/// What `snowflake_stats()` counts, each written only on a cold path.
pub struct Counters {
    /// Durable writes of a new mark since start.
    renewals: AtomicU64,
    /// Backward clock steps seen since start (including a clock behind the recovered mark).
    clock_steps_back: AtomicU64,
    largest_step_back_ms: AtomicU64,
    /// 1 ms naps of callers that found the ids more than `max_drift` ahead of the clock.
    clock_waits: AtomicU64,
    /// Calls that failed after `drift_wait` of such naps.
    clock_failures: AtomicU64,
    /// 1 ms naps of paced backends (see `pacing`).
    paced_waits: AtomicU64,
    /// Ids handed out, added by each backend at the end of each transaction (see `stats`).
    ids: AtomicU64,
    /// When the generator was set up (start, or crash recovery), in Unix ms.
    started_unix_ms: AtomicU64,
}

/// A copy of the generator's state and counters, for `snowflake_stats()`.
pub struct Snapshot {
    pub tick: Tick,
    pub lease: u64,
    pub mark: u64,
    /// The layout of the recovered mark, while it differs from the configured one.
    pub recorded_layout: Option<Layout>,
    pub renewals: u64,
    pub clock_steps_back: u64,
    pub largest_step_back_ms: u64,
    pub clock_waits: u64,
    pub clock_failures: u64,
    pub paced_waits: u64,
    pub ids: u64,
    pub started_unix_ms: i64,
}

impl Generator {
    /// The generator at server start (or after a crash reset shared memory), above the mark of
    /// the previous run.
    pub fn starting_from(state: state_file::Contents, layout: &Layout) -> Generator {
        let g = Generator {
            // 0, not the floor: the first renewal raises it (`raise_to_floor`), and warns if
            // the clock is behind the floor.
            tick: AtomicU64::new(0),
            clock_high_ms: AtomicU64::new(0),
            renew_at: AtomicU64::new(0),
            _end_of_hot_line: [0; 5],
            pace: AtomicU64::new(0),
            pace_waiting: AtomicU64::new(0),
            lease: AtomicU64::new(0),
            mark: AtomicU64::new(0),
            mark_lsn: AtomicU64::new(0),
            floor: AtomicU64::new(0),
            not_carried: AtomicBool::new(state == state_file::Contents::NotCarried),
            mark_lost: AtomicBool::new(state == state_file::Contents::Lost),
            layout_differs: AtomicBool::new(false),
            recorded_layout: [AtomicU64::new(0), AtomicU64::new(0)],
            floor_on_purpose: AtomicU64::new(0),
            // With a registry, no id until it (or the lease cached from it) opens the ceiling.
            ceiling: AtomicU64::new(if gucs::registry().is_some() { 0 } else { u64::MAX }),
            write_failure: write_failure::WriteFailure::new(),
            counters: Counters {
                renewals: AtomicU64::new(0),
                clock_steps_back: AtomicU64::new(0),
                largest_step_back_ms: AtomicU64::new(0),
                clock_waits: AtomicU64::new(0),
                clock_failures: AtomicU64::new(0),
                paced_waits: AtomicU64::new(0),
                ids: AtomicU64::new(0),
                started_unix_ms: AtomicU64::new(clock::now_unix_ms().max(0) as u64),
            },
        };
        if let state_file::Contents::Mark(mark) = state {
            g.raise_floor(mark, layout);
        }
        // A worker id from the server's address starts above what the address's previous
        // holder may have made (`address`): a floor ahead of the clock on purpose.
        if let Some(ms) =
            mutant!(address_reuse, { crate::address::reuse_floor_ms() }, { None::<i64> })
        {
            g.floor_ahead_on_purpose(layout, ms);
        }
        g
    }

    /// The next tick of the cluster (rules 1 and 2). Errors if this is a standby, or the clock
    /// is too far behind, or the layout is used up.
    #[inline]
    pub fn next_tick(&self, layout: &Layout) -> Tick {
        let max_drift = layout.units_in(gucs::max_drift_ms());
        let mut now = self.now_units(layout);
        let mut naps = 0;
        // Whether this call holds a pacing slot, which it keeps through retries of the CAS.
        let mut paced = false;
        let mut prev = self.tick.load(Ordering::Acquire);
        loop {
            match layout.advance(Tick(prev), now, max_drift) {
                Advance::To(next) => {
                    if mutant!(
                        pacing,
                        { !paced && pacing::applies(layout, next, now, max_drift) },
                        { false }
                    ) {
                        now = self.wait_for_slot(layout, now, &mut naps);
                        paced = true;
                        prev = self.tick.load(Ordering::Acquire);
                        continue;
                    }
                    let units = layout.units(next);
                    if units >= self.renew_at.load(Ordering::Acquire) {
                        self.cover(layout, units, now);
                    }
                    mutant!(
                        cas,
                        {
                            match self.tick.compare_exchange_weak(
                                prev,
                                next.0,
                                Ordering::AcqRel,
                                Ordering::Acquire,
                            ) {
                                Ok(_) => return next,
                                Err(current) => prev = current,
                            }
                        },
                        {
                            let _ = prev;
                            self.tick.store(next.0, Ordering::Release);
                            return next;
                        }
                    );
                }
                Advance::TooFarAhead { ahead } => {
                    // `now` may be stale: read when the call began, and a backend descheduled
                    // since (or retrying a contended CAS) would see the ids further ahead than
                    // they are. Look at the clock again before waiting, or failing when
                    // drift_wait is 0.
                    let fresh = self.now_units(layout);
                    if fresh <= now {
                        self.nap_for_clock(&mut naps, ahead * layout.unit_ms);
                    }
                    now = self.now_units(layout);
                    prev = self.tick.load(Ordering::Acquire);
                }
                Advance::Exhausted => problems::layout_exhausted(layout),
            }
        }
    }

    /// Takes the next pacing slot and waits, holding no lock, until the clock reaches its time
    /// unit; returns the clock then. The wait is behind at most one slot of each caller that
    /// waits now (see `pacing`), shares the call's `snowflake.drift_wait` with its waits for
    /// the clock (`naps`), and is counted in the stats. A slot that the callers now waiting no
    /// longer justify (the clock stepped back, or callers ahead gave up) is traded for a new one.
    #[cold]
    fn wait_for_slot(&self, layout: &Layout, mut now: u64, naps: &mut u64) -> u64 {
        // Counted before the slot is taken: callers that take slots at the same time see each
        // other, and never get the same one.
        let _waiting = Waiting::enter(&self.pace_waiting);
        let mut unit = self.take_slot(layout, now);
        while now < unit {
            mutant!(
                pacing_bound,
                {
                    self.nap(naps, Event::Pacing, &self.counters.paced_waits, |waited| {
                        problems::paced_too_long(waited, gucs::max_drift_ms(), layout)
                    });
                },
                {
                    let _ = (&naps, gucs::max_drift_ms);
                    nap_one_ms(Event::Pacing);
                    self.counters.paced_waits.fetch_add(1, Ordering::Relaxed);
                }
            );
            now = self.now_units(layout);
            if pacing::slot_is_stale(layout, unit, now, self.others_waiting()) {
                unit = self.take_slot(layout, now);
            }
        }
        now
    }

    /// The callers that wait for a pacing slot, or take one, besides this one (counted).
    fn others_waiting(&self) -> u64 {
        self.pace_waiting.load(Ordering::Relaxed).saturating_sub(1)
    }

    /// The next pacing slot's time unit, from a counter no further ahead than the callers now
    /// waiting justify (see `pacing::take_slot`).
    fn take_slot(&self, layout: &Layout, now: u64) -> u64 {
        let waiting = self.others_waiting();
        let mut next = self.pace.load(Ordering::Relaxed);
        loop {
            let (after, unit) = pacing::take_slot(layout, next, now, waiting);
            match self.pace.compare_exchange_weak(next, after, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return unit,
                Err(current) => next = current,
            }
        }
    }

    /// The clock in time units of the layout, watched for backward steps.
    #[inline]
    fn now_units(&self, layout: &Layout) -> u64 {
        let unix_ms = clock::now_unix_ms();
        self.watch_clock(unix_ms);
        units_at(layout, unix_ms)
    }

    /// Keeps the highest clock reading, and reports a reading far below it as a backward step.
    /// One load and compare per call; a store about once per millisecond. Readings before 1970
    /// count as 0.
    #[inline]
    fn watch_clock(&self, unix_ms: i64) {
        let now = unix_ms.max(0) as u64;
        let high = self.clock_high_ms.load(Ordering::Relaxed);
        if now > high {
            self.clock_high_ms.fetch_max(now, Ordering::Relaxed);
        } else if now + STEP_TOLERANCE_MS < high {
            self.clock_stepped_back();
        }
    }

    /// Confirms a suspected backward step with a fresh reading taken after the high-water mark
    /// was loaded (so a backend that was merely descheduled does not report one), then reports
    /// it once: the backend that lowers the mark to the new clock warns and counts.
    #[cold]
    fn clock_stepped_back(&self) {
        let high = self.clock_high_ms.load(Ordering::Acquire);
        let fresh = clock::now_unix_ms().max(0) as u64;
        if fresh + STEP_TOLERANCE_MS >= high {
            return;
        }
        if self
            .clock_high_ms
            .compare_exchange(high, fresh, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            let events = self.counters.step_back(high - fresh);
            problems::clock_stepped_back(high - fresh, events, gucs::max_drift_ms());
        }
    }

    /// Sleeps one millisecond, holding no lock, while the next id would run more than
    /// `snowflake.max_drift` ahead of the clock; fails once the call used up `snowflake.drift_wait`.
    #[cold]
    fn nap_for_clock(&self, naps: &mut u64, ahead_ms: u64) {
        self.nap(naps, Event::Clock, &self.counters.clock_waits, |waited| {
            self.counters.clock_failures.fetch_add(1, Ordering::Relaxed);
            problems::clock_too_far_behind(ahead_ms, gucs::max_drift_ms(), waited)
        });
    }

    /// One nap of a call that waits (for the clock, or for its pacing slot), or `fail` once the
    /// call has napped `snowflake.drift_wait` times: every wait of one call shares that bound.
    /// Naps are counted instead of timed so that a clock that steps during the wait cannot
    /// stretch or cut it. `taken` counts the naps for the stats as each begins: a call that
    /// fails at once (`drift_wait = 0`) napped none, and a nap that a cancel ends still counts.
    fn nap(&self, naps: &mut u64, event: Event, taken: &AtomicU64, fail: impl FnOnce(u64)) {
        mutant!(nap_count, {}, {
            taken.fetch_add(1, Ordering::Relaxed);
        });
        if *naps >= gucs::drift_wait_ms() {
            fail(*naps);
        }
        *naps += 1;
        mutant!(
            nap_count,
            {
                taken.fetch_add(1, Ordering::Relaxed);
            },
            {}
        );
        nap_one_ms(event);
    }

    /// Raises the floor to a recovered mark, converted to the configured layout, and notes a
    /// mark of another layout. Returns whether the floor moved.
    fn raise_floor(&self, mark: Mark, layout: &Layout) -> bool {
        let units = mark.units_in(layout).min(layout.end_mark());
        if !mark.layout.same_ids(layout) {
            self.note_recorded_layout(&mark.layout);
        }
        let moved = units > self.floor.load(Ordering::Acquire);
        if moved {
            self.floor.store(units, Ordering::Release);
            self.mark.fetch_max(units, Ordering::AcqRel);
        }
        moved
    }

    fn note_recorded_layout(&self, recorded: &Layout) {
        let bytes = mark::layout_to_bytes(recorded);
        for (word, half) in self.recorded_layout.iter().zip(bytes.chunks(8)) {
            word.store(u64::from_le_bytes(half.try_into().unwrap()), Ordering::Release);
        }
        self.layout_differs.store(true, Ordering::Release);
    }

    /// The layout of the recovered mark, when it differs from the configured one.
    fn recorded_layout(&self) -> Option<Layout> {
        if !self.layout_differs.load(Ordering::Acquire) {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (word, half) in self.recorded_layout.iter().zip(bytes.chunks_mut(8)) {
            half.copy_from_slice(&word.load(Ordering::Acquire).to_le_bytes());
        }
        mark::layout_from_bytes(&bytes).ok()
    }

    /// Adds the ids a backend counted (see `stats`).
    pub fn count_ids(&self, n: u64) {
        self.counters.ids.fetch_add(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Snapshot {
        let c = &self.counters;
        Snapshot {
            tick: Tick(self.tick.load(Ordering::Acquire)),
            lease: self.lease.load(Ordering::Acquire),
            mark: self.mark.load(Ordering::Acquire),
            recorded_layout: self.recorded_layout(),
            renewals: c.renewals.load(Ordering::Relaxed),
            clock_steps_back: c.clock_steps_back.load(Ordering::Relaxed),
            largest_step_back_ms: c.largest_step_back_ms.load(Ordering::Relaxed),
            clock_waits: c.clock_waits.load(Ordering::Relaxed),
            clock_failures: c.clock_failures.load(Ordering::Relaxed),
            paced_waits: c.paced_waits.load(Ordering::Relaxed),
            ids: c.ids.load(Ordering::Relaxed),
            started_unix_ms: c.started_unix_ms.load(Ordering::Relaxed) as i64,
        }
    }
}

impl Counters {
    /// Counts a backward clock step of `by_ms`; returns how many there were since start.
    fn step_back(&self, by_ms: u64) -> u64 {
        self.largest_step_back_ms.fetch_max(by_ms, Ordering::Relaxed);
        self.clock_steps_back.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// A caller counted among those that wait for a pacing slot, for as long as it waits. The count
/// goes down again however the wait ends: at the drop, also by an error (a cancel,
/// `statement_timeout`, `drift_wait`), which pgrx unwinds through Rust frames; and at the exit
/// of a process that a FATAL ends inside the wait (`pg_terminate_backend`, a parallel worker
/// its leader ends, a client gone), which unwinds nothing: a callback of `before_shmem_exit`
/// takes it back. Without it, a plain role leaked one count per such exit (+196 for 200
/// timed-out parallel statements), and the counter ran that far ahead of the clock for good. A
/// backend killed outright takes the whole server through crash recovery, which starts the
/// generator afresh.
struct Waiting<'a>(&'a AtomicU64);

/// Whether this process holds one count of `pace_waiting` (see `Waiting`).
static COUNTED: AtomicBool = AtomicBool::new(false);
/// Whether this process has registered `uncount_at_exit`.
static AT_EXIT: AtomicBool = AtomicBool::new(false);

impl<'a> Waiting<'a> {
    fn enter(count: &'a AtomicU64) -> Waiting<'a> {
        if mutant!(pacing_exit, { !AT_EXIT.swap(true, Ordering::Relaxed) }, { false }) {
            // SAFETY: registers a callback of this process, once; it runs before shared memory
            // is detached.
            unsafe { pgrx::pg_sys::before_shmem_exit(Some(uncount_at_exit), 0.into()) };
        }
        count.fetch_add(1, Ordering::Relaxed);
        COUNTED.store(true, Ordering::Relaxed);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        COUNTED.store(false, Ordering::Relaxed);
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// At the exit of a process that a FATAL ended inside a wait for its slot: its count back.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn uncount_at_exit(_code: std::ffi::c_int, _arg: pgrx::pg_sys::Datum) {
    if COUNTED.swap(false, Ordering::Relaxed) {
        if let Some(generator) = shmem::try_get() {
            generator.pace_waiting.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The clock in time units of the layout, not watched (for callers off the hot path).
pub fn clock_units(layout: &Layout) -> u64 {
    units_at(layout, clock::now_unix_ms())
}

#[inline]
fn units_at(layout: &Layout, unix_ms: i64) -> u64 {
    match layout.units_at(unix_ms) {
        Some(units) => units,
        None => problems::clock_before_epoch(unix_ms, layout),
    }
}

/// 1 ms is the resolution of the clock: in a layout of 1 ms units, the clock then has a whole
/// sequence more to give.
fn nap_one_ms(event: wait_event::Event) {
    wait_event::nap(1, event);
}
