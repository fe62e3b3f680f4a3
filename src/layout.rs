//! The bit layout of an id and the rule that advances the generator, in pure Rust.
//!
//! ```text
//!  63  62                                         22 21        12 11          0
//! +---+---------------------------------------------+------------+-------------+
//! | 0 |  milliseconds since 2010-11-04 01:42:54.657  | worker id  |  sequence   |
//! +---+---------------------------------------------+------------+-------------+
//!   1                     41 bits                       10 bits      12 bits
//! ```
//!
//! This is Twitter's layout, so that common decoders agree with ours bit for bit.
//!
//! The generator does not store ids. It stores a *tick*: the id without its worker bits,
//! `milliseconds << 12 | sequence`, a 53-bit counter in which a full sequence carries into the
//! next millisecond by plain `+ 1`. Nothing here knows about PostgreSQL; every rule is covered by
//! plain `#[test]`s with an injected clock.

/// Twitter's epoch, 2010-11-04 01:42:54.657 UTC, in milliseconds since the Unix epoch.
pub const EPOCH_UNIX_MS: i64 = 1_288_834_974_657;

pub const TIME_BITS: u32 = 41;
pub const WORKER_BITS: u32 = 10;
pub const SEQUENCE_BITS: u32 = 12;

pub const MAX_WORKER_ID: u32 = (1 << WORKER_BITS) - 1;
pub const MAX_SEQUENCE: u32 = (1 << SEQUENCE_BITS) - 1;
/// The last millisecond the layout can hold: 2080-07-10 17:30:30.208 UTC.
pub const MAX_MS: u64 = (1 << TIME_BITS) - 1;
/// The highest durable mark there can be: a mark is a millisecond no id has reached, so one past
/// the last millisecond says "every id is used up". A mark read back from the state file or from
/// WAL that is higher than this did not come from this layout: it is corrupt.
pub const END_MARK: u64 = MAX_MS + 1;

const SEQUENCE_MASK: u64 = MAX_SEQUENCE as u64;
const WORKER_SHIFT: u32 = SEQUENCE_BITS;
const TIME_SHIFT: u32 = SEQUENCE_BITS + WORKER_BITS;

/// An id without its worker bits: `ms << 12 | sequence`. Ordering ticks orders ids of one worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tick(pub u64);

impl Tick {
    /// The first tick of millisecond `ms`, which is at most [`END_MARK`] (so that no bit is
    /// shifted out: `END_MARK << 12` is 2^53).
    pub const fn at_ms(ms: u64) -> Tick {
        assert!(ms <= END_MARK, "a millisecond past the end of the layout");
        Tick(ms << SEQUENCE_BITS)
    }

    pub const fn ms(self) -> u64 {
        self.0 >> SEQUENCE_BITS
    }

    #[cfg(test)]
    pub const fn sequence(self) -> u32 {
        (self.0 & SEQUENCE_MASK) as u32
    }

    /// The id this tick makes for `worker_id`. The caller guarantees `worker_id <= MAX_WORKER_ID`
    /// and `self.ms() <= MAX_MS`, so bit 63 stays 0 and the result is a non-negative `i64`.
    #[inline]
    pub const fn id(self, worker_id: u32) -> i64 {
        let time = (self.0 >> SEQUENCE_BITS) << TIME_SHIFT;
        let worker = (worker_id as u64) << WORKER_SHIFT;
        (time | worker | (self.0 & SEQUENCE_MASK)) as i64
    }
}

/// The three fields of an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    /// Milliseconds since [`EPOCH_UNIX_MS`].
    pub ms: u64,
    pub worker_id: u32,
    pub sequence: u32,
}

impl Parts {
    /// Splits an id. `None` for negative ids: bit 63 is always 0 in this layout.
    pub const fn of(id: i64) -> Option<Parts> {
        if id < 0 {
            return None;
        }
        let id = id as u64;
        Some(Parts {
            ms: id >> TIME_SHIFT,
            worker_id: ((id >> WORKER_SHIFT) & MAX_WORKER_ID as u64) as u32,
            sequence: (id & SEQUENCE_MASK) as u32,
        })
    }

    /// Milliseconds since the Unix epoch.
    pub const fn unix_ms(self) -> i64 {
        EPOCH_UNIX_MS + self.ms as i64
    }
}

/// Milliseconds since [`EPOCH_UNIX_MS`] of a Unix-epoch reading; `None` before the epoch.
pub const fn ms_since_epoch(unix_ms: i64) -> Option<u64> {
    if unix_ms < EPOCH_UNIX_MS {
        None
    } else {
        Some((unix_ms - EPOCH_UNIX_MS) as u64)
    }
}

/// What the generator should do next, given the last tick handed out and the clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advance {
    /// Hand out this tick.
    To(Tick),
    /// The next tick would run more than the allowed drift ahead of the clock: it lies
    /// `ahead_ms` milliseconds in the clock's future. Wait for the clock or fail.
    TooFarAhead { ahead_ms: u64 },
    /// The next tick would not fit in 41 bits of milliseconds (after 2080-07-10).
    Exhausted,
}

/// The advance rule: the smallest tick above `prev` that is not behind the clock.
///
/// `max(prev + 1, now << 12 | (prev + 1) & 0xfff)`:
/// - Ids strictly increase whatever the clock does: the result always exceeds `prev`.
/// - When the clock is behind (`now` stepped back, or earlier calls borrowed time ahead),
///   `prev + 1` wins: the sequence counts on and a full sequence carries into the next
///   millisecond instead of spinning on the clock, so a burst above 4096 ids/ms borrows time.
/// - When the clock has moved on, the millisecond jumps to `now` but the sequence keeps counting
///   from `prev` instead of restarting at 0. Twitter's rule restarts it at 0, so at low traffic
///   every id ends in twelve zero bits and `id % n` puts every row in one shard. Counting on keeps
///   the low bits uniform at no cost in capacity: once a millisecond's sequence wraps, later
///   ticks are `prev + 1` until the clock catches up, so 4096 ids per millisecond still fit.
/// - The borrowed time is bounded: past `max_drift_ms` ahead of the clock the rule refuses.
pub const fn advance(prev: Tick, now_ms: u64, max_drift_ms: u64) -> Advance {
    // Also keeps `now_ms << SEQUENCE_BITS` from shifting bits out for an absurd clock.
    if now_ms > MAX_MS {
        return Advance::Exhausted;
    }
    let succ = prev.0 + 1;
    let clocked = (now_ms << SEQUENCE_BITS) | (succ & SEQUENCE_MASK);
    let next = Tick(if clocked > succ { clocked } else { succ });
    if next.ms() > MAX_MS {
        return Advance::Exhausted;
    }
    // `next.ms() > now_ms` only while borrowing; saturating keeps a clock past MAX_MS safe.
    let ahead_ms = next.ms().saturating_sub(now_ms);
    if ahead_ms > max_drift_ms {
        return Advance::TooFarAhead { ahead_ms };
    }
    Advance::To(next)
}

/// Pacing: how borrowed time is kept for everyone.
///
/// Past `max_drift` ahead of the clock every caller waits (and fails after `drift_wait`), so one
/// backend that bursts above 4096 ids/ms could use up the borrowed time and make innocent callers
/// wait and fail. Pacing starts halfway: once the next id lies more than `max_drift / 2` ahead of
/// the clock, each backend may take at most `share` ids per clock millisecond, where `share` is
/// 4096 divided by the number of backends there can be. All backends together then take at most
/// the 4096 ids per millisecond that the clock adds, so bursts alone can never drive the ids much
/// further than halfway: only a clock step can reach `max_drift`. A burst is held to the layout's
/// rate, a single-row caller almost never notices, and the other half of `max_drift` stays free to
/// absorb a clock that steps back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacer {
    /// The clock millisecond in which this backend last took a paced id, and how many.
    ms: u64,
    taken: u32,
}

impl Pacer {
    pub const fn new() -> Pacer {
        Pacer { ms: 0, taken: 0 }
    }

    /// Whether `next` lies deep enough in borrowed time to be paced: one compare on the hot path.
    #[inline]
    pub const fn applies(next: Tick, now_ms: u64, max_drift_ms: u64) -> bool {
        next.ms() > now_ms + max_drift_ms / 2
    }

    /// The share of one backend: `4096 / backends`, at least 1.
    pub const fn share(backends: u32) -> u32 {
        let per = (MAX_SEQUENCE + 1) / if backends == 0 { 1 } else { backends };
        if per == 0 {
            1
        } else {
            per
        }
    }

    /// Counts a paced id taken at clock millisecond `now_ms`; `false` once this backend has
    /// used its share of that millisecond: it should then wait for the next one.
    pub fn take(&mut self, now_ms: u64, share: u32) -> bool {
        if self.ms != now_ms {
            self.ms = now_ms;
            self.taken = 0;
        }
        if self.taken >= share {
            return false;
        }
        self.taken += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRIFT: u64 = 10_000;

    fn to(a: Advance) -> Tick {
        match a {
            Advance::To(t) => t,
            other => panic!("expected a tick, got {other:?}"),
        }
    }

    #[test]
    fn known_answer_for_2020_new_year() {
        // Computed independently (Python): 2020-01-01T00:00:00Z, worker 5, sequence 7.
        let id: i64 = 1_212_161_512_043_466_759;
        let p = Parts::of(id).unwrap();
        assert_eq!(p.unix_ms(), 1_577_836_800_000);
        assert_eq!((p.worker_id, p.sequence), (5, 7));
        assert_eq!(Tick::at_ms(p.ms).id(0) | 5 << 12 | 7, id);
    }

    #[test]
    fn pack_and_unpack_roundtrip_at_the_edges() {
        for &(ms, worker, seq) in &[
            (0u64, 0u32, 0u32),
            (0, MAX_WORKER_ID, MAX_SEQUENCE),
            (MAX_MS, MAX_WORKER_ID, MAX_SEQUENCE),
            (MAX_MS, 0, 0),
            (1_234_567_890_123, 513, 2048),
        ] {
            let tick = Tick(ms << 12 | seq as u64);
            let id = tick.id(worker);
            assert!(id >= 0, "bit 63 must stay 0 for {ms} {worker} {seq}");
            assert_eq!(
                Parts::of(id),
                Some(Parts {
                    ms,
                    worker_id: worker,
                    sequence: seq
                })
            );
        }
        assert_eq!(
            Tick(MAX_MS << 12 | MAX_SEQUENCE as u64).id(MAX_WORKER_ID),
            i64::MAX
        );
        assert_eq!(
            Parts::of(0),
            Some(Parts {
                ms: 0,
                worker_id: 0,
                sequence: 0
            })
        );
    }

    #[test]
    fn negative_ids_have_no_parts() {
        assert_eq!(Parts::of(-1), None);
        assert_eq!(Parts::of(i64::MIN), None);
    }

    #[test]
    fn worker_bits_do_not_leak_into_neighbours() {
        let tick = Tick(7 << 12 | 5);
        let a = Parts::of(tick.id(0)).unwrap();
        let b = Parts::of(tick.id(MAX_WORKER_ID)).unwrap();
        assert_eq!((a.ms, a.sequence), (b.ms, b.sequence));
        assert_eq!((a.worker_id, b.worker_id), (0, MAX_WORKER_ID));
    }

    #[test]
    fn ms_since_epoch_rejects_readings_before_2010() {
        assert_eq!(ms_since_epoch(EPOCH_UNIX_MS), Some(0));
        assert_eq!(ms_since_epoch(EPOCH_UNIX_MS + 5), Some(5));
        assert_eq!(ms_since_epoch(EPOCH_UNIX_MS - 1), None);
        assert_eq!(ms_since_epoch(0), None);
    }

    #[test]
    fn clock_ahead_jumps_to_the_clock() {
        let t = to(advance(Tick::at_ms(100), 250, DRIFT));
        assert_eq!(t.ms(), 250);
    }

    #[test]
    fn same_millisecond_counts_the_sequence() {
        let prev = Tick(100 << 12 | 7);
        let t = to(advance(prev, 100, DRIFT));
        assert_eq!((t.ms(), t.sequence()), (100, 8));
    }

    #[test]
    fn sequence_keeps_counting_across_milliseconds_at_low_traffic() {
        // One id per millisecond: Twitter's rule would give sequence 0 every time.
        let mut t = Tick::at_ms(1_000);
        let mut seqs = Vec::new();
        for now in 1_001..1_101 {
            t = to(advance(t, now, DRIFT));
            assert_eq!(t.ms(), now);
            seqs.push(t.sequence());
        }
        assert_eq!(seqs, (1..=100).collect::<Vec<u32>>());
    }

    #[test]
    fn clock_behind_never_repeats_or_goes_back() {
        let prev = Tick(5_000 << 12 | 9);
        // The clock stepped back 3 s.
        let t = to(advance(prev, 2_000, DRIFT));
        assert_eq!(t, Tick(prev.0 + 1));
        // And keeps going back: still increasing.
        let u = to(advance(t, 1_000, DRIFT));
        assert!(u > t);
    }

    #[test]
    fn full_sequence_rolls_into_the_next_millisecond_without_waiting() {
        let prev = Tick(100 << 12 | MAX_SEQUENCE as u64);
        let t = to(advance(prev, 100, DRIFT));
        assert_eq!((t.ms(), t.sequence()), (101, 0));
    }

    #[test]
    fn a_burst_borrows_time_and_the_clock_catches_up() {
        // 3 * 4096 ids inside one millisecond of clock borrow two milliseconds.
        let mut t = Tick::at_ms(100);
        for _ in 0..3 * 4096 {
            t = to(advance(t, 100, DRIFT));
        }
        assert_eq!(t.ms(), 103);
        // Once the clock passes the borrowed time, ids follow the clock again.
        let u = to(advance(t, 110, DRIFT));
        assert_eq!(u.ms(), 110);
        assert!(u > t);
    }

    #[test]
    fn sustained_overload_is_capped_at_4096_ids_per_millisecond() {
        // 10 000 ids per clock millisecond for 100 ms: the ticks advance 4096 per ms of borrowed
        // time, so the drift grows by about (10000 - 4096) / 4096 ms per clock ms.
        let mut t = Tick::at_ms(0);
        for now in 0..100u64 {
            for _ in 0..10_000 {
                t = to(advance(t, now, DRIFT));
            }
        }
        let ids = 100 * 10_000u64 + 1;
        assert_eq!(t.0, ids - 1, "every id consumed exactly one tick");
        assert_eq!(t.ms(), (ids - 1) / 4096);
    }

    #[test]
    fn drift_bound_refuses_beyond_the_limit() {
        let prev = Tick::at_ms(20_000);
        // 10 s behind plus one tick: 10 000 ms ahead, allowed.
        assert!(matches!(advance(prev, 10_000, DRIFT), Advance::To(_)));
        // 10.001 s behind: the next tick would be 10 001 ms ahead.
        assert_eq!(
            advance(prev, 9_999, DRIFT),
            Advance::TooFarAhead { ahead_ms: 10_001 }
        );
        // A zero bound still allows ids in the clock's own millisecond.
        assert!(matches!(advance(Tick::at_ms(50), 50, 0), Advance::To(_)));
        assert_eq!(
            advance(Tick(50 << 12 | MAX_SEQUENCE as u64), 50, 0),
            Advance::TooFarAhead { ahead_ms: 1 }
        );
    }

    #[test]
    fn the_layout_ends_in_2080() {
        let last = Tick(MAX_MS << 12 | MAX_SEQUENCE as u64);
        assert_eq!(advance(last, MAX_MS, DRIFT), Advance::Exhausted);
        assert_eq!(
            advance(Tick::at_ms(5), MAX_MS + 1, DRIFT),
            Advance::Exhausted
        );
        assert!(matches!(
            advance(Tick::at_ms(MAX_MS), MAX_MS, DRIFT),
            Advance::To(_)
        ));
        // 2080-07-10 17:30:30.208 UTC is the last representable millisecond.
        assert_eq!(EPOCH_UNIX_MS + MAX_MS as i64, 3_487_858_230_208);
    }

    #[test]
    fn randomized_clocks_keep_ticks_strictly_increasing() {
        // A seeded xorshift walk of the clock, forward and back; print the seed on failure.
        let seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut x = seed;
        let mut now: u64 = 1_000_000;
        let mut t = Tick::at_ms(now);
        for i in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 8 {
                0 => now = now.saturating_sub(x % 5_000),
                1..=3 => now += x % 3,
                _ => {}
            }
            match advance(t, now, DRIFT) {
                Advance::To(u) => {
                    assert!(u > t, "seed {seed:#x} step {i}: {u:?} <= {t:?}");
                    assert!(
                        u.ms() <= now + DRIFT,
                        "seed {seed:#x} step {i}: beyond the bound"
                    );
                    t = u;
                }
                Advance::TooFarAhead { ahead_ms } => {
                    assert!(ahead_ms > DRIFT);
                    now += ahead_ms; // the clock catches up, as a waiting caller would see
                }
                Advance::Exhausted => panic!("seed {seed:#x} step {i}: exhausted"),
            }
        }
    }

    #[test]
    fn pacing_applies_past_half_of_max_drift() {
        assert!(!Pacer::applies(Tick::at_ms(1_000), 1_000, 10_000));
        assert!(!Pacer::applies(Tick::at_ms(6_000), 1_000, 10_000));
        assert!(Pacer::applies(Tick::at_ms(6_001), 1_000, 10_000));
        // A zero bound paces every borrowed id (the drift bound then refuses them anyway).
        assert!(Pacer::applies(Tick::at_ms(1_001), 1_000, 0));
    }

    #[test]
    fn the_shares_of_all_backends_add_up_to_at_most_one_millisecond_of_ids() {
        for backends in [0, 1, 2, 7, 100, 4096, 5000, 262_143] {
            let share = Pacer::share(backends);
            assert!(share >= 1);
            assert!(
                backends.max(1) as u64 * share as u64 <= 4096 || share == 1,
                "{backends} backends x {share}"
            );
        }
        assert_eq!(Pacer::share(100), 40);
    }

    #[test]
    fn a_paced_backend_takes_its_share_then_waits_for_the_next_millisecond() {
        let mut p = Pacer::new();
        assert!((0..40).all(|_| p.take(7, 40)));
        assert!(!p.take(7, 40));
        assert!(p.take(8, 40));
    }

    /// Bursters that would take 20 000 ids per clock millisecond each, and 90 callers that take
    /// one id now and then, under the advance rule with pacing, as the generator runs them:
    /// the ids never run further ahead than halfway to `max_drift`, plus the last millisecond
    /// taken, so no caller ever meets the drift bound while the clock moves forward.
    #[test]
    fn bursts_alone_never_reach_the_drift_bound() {
        const BACKENDS: u32 = 100;
        let share = Pacer::share(BACKENDS);
        for bursters in [1usize, 3, 10] {
            let mut pacers = vec![Pacer::new(); BACKENDS as usize];
            let mut asleep_until = vec![0u64; BACKENDS as usize];
            let mut t = Tick::at_ms(1_000);
            let mut deepest = 0;
            // 4 s of clock in 100 us steps: one burster needs 1.3 s to borrow 5 s.
            for step in 0..40_000u64 {
                let now = 1_000 + step / 10;
                for b in 0..BACKENDS as usize {
                    let wants = if b < bursters {
                        2_000 // 20 000 per ms
                    } else if (step + b as u64).is_multiple_of(997) {
                        1
                    } else {
                        0
                    };
                    for _ in 0..wants {
                        if asleep_until[b] > now {
                            break;
                        }
                        let next = match advance(t, now, DRIFT) {
                            Advance::To(next) => next,
                            other => panic!("{bursters} bursters, step {step}: {other:?}"),
                        };
                        if Pacer::applies(next, now, DRIFT) && !pacers[b].take(now, share) {
                            asleep_until[b] = now + 1;
                            break;
                        }
                        t = next;
                        deepest = deepest.max(t.ms() - now.min(t.ms()));
                    }
                }
            }
            assert!(
                deepest <= DRIFT / 2 + 1,
                "{bursters} bursters drove the ids {deepest} ms ahead"
            );
            assert!(
                deepest >= DRIFT / 2,
                "the bursts never reached the pacing point"
            );
        }
    }
}
