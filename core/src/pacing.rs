//! Pacing: how borrowed time is shared out, in plain Rust.
//!
//! Past `max_drift` ahead of the clock every caller waits (and fails after `drift_wait`), so one
//! backend that bursts above the layout's rate could use up the borrowed time and make innocent
//! callers wait and fail. Pacing starts halfway: once the next id lies more than
//! `max_drift / 2` ahead of the clock, every id needs a *slot*. Slots come from one counter in
//! shared memory, in the order they are asked for, as many per clock time unit as the layout has
//! ids per unit; a caller whose slot lies in a later time unit waits for the clock to reach it.
//!
//! So past halfway, ids are taken no faster than the clock adds them, whatever the number of
//! backends and whatever the layout (one id per unit with `sequence_bits = 0`): bursts alone
//! hold the ids about halfway, and only a clock step can reach `max_drift`. And the slots are
//! first come, first served: a caller holds one slot at a time, so one that arrives waits behind
//! at most one slot of each caller already waiting, however hard they burst. An earlier rule
//! gave each backend an equal share of every unit's ids, at least one: with fewer ids per unit
//! than backends (`sequence_bits = 0`, or `sonyflake` with many connections), six bursting
//! sessions took six ids per unit and drove everyone else into the drift bound.

use crate::layout::{Layout, Tick};

/// Whether `next` lies deep enough in borrowed time to be paced: one compare on the hot path.
#[inline]
pub const fn applies(layout: &Layout, next: Tick, now: u64, max_drift: u64) -> bool {
    layout.units(next) > now + max_drift / 2
}

/// The slot counter counts slots as a tick counts ids: `units << sequence_bits | n`, so that a
/// time unit holds as many slots as ids. Returns the counter's next value and the time unit of
/// the slot taken, for a counter at `next`, the clock at time unit `now`, and `waiting` other
/// callers that wait for a slot of theirs now (or are taking one).
///
/// The counter never runs further ahead than the clock and those callers justify: past the
/// current unit's slots, one slot for each caller that waits. A counter behind the clock starts
/// at the clock's unit (an idle while banks no slots for a later burst); one ahead of that bound
/// is pulled back to it. Only two things leave it there: a backward clock step, and callers that
/// took a slot and stopped waiting for it (cancelled, timed out, failed). Without the pull, a
/// clock stepped back 30 s stalled every paced call for 30 s, and a role that cancels its calls
/// (`statement_timeout = '1ms'` in a loop) pushed everyone else's slots ahead by one unit per
/// cancelled call.
pub const fn take_slot(layout: &Layout, next: u64, now: u64, waiting: u64) -> (u64, u64) {
    let first_of_now = layout.tick_at(now).0;
    let most = layout.tick_at(now + 1).0 + waiting;
    let slot = if next < first_of_now {
        first_of_now
    } else if mutant!(pacing_pull_back, { next > most }, { false }) {
        most
    } else {
        next
    };
    (slot + 1, mutant!(pacing_slots, { layout.units(Tick(slot)) }, { now }))
}

/// Whether a slot of time unit `unit` is further ahead of the clock at `now` than `waiting`
/// callers justify (see `take_slot`): its caller takes another.
pub const fn slot_is_stale(layout: &Layout, unit: u64, now: u64, waiting: u64) -> bool {
    unit > layout.units(Tick(layout.tick_at(now + 1).0 + waiting))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Advance, JS53, SONYFLAKE, TWITTER};

    const T: Layout = TWITTER;
    const DRIFT: u64 = 10_000;

    #[test]
    fn pacing_applies_past_half_of_max_drift() {
        assert!(!applies(&T, T.tick_at(1_000), 1_000, 10_000));
        assert!(!applies(&T, T.tick_at(6_000), 1_000, 10_000));
        assert!(applies(&T, T.tick_at(6_001), 1_000, 10_000));
        // A zero bound paces every borrowed id (the drift bound then refuses them anyway).
        assert!(applies(&T, T.tick_at(1_001), 1_000, 0));
    }

    #[test]
    fn slots_come_per_unit_in_order_and_never_bank() {
        let one = Layout::custom(0, 1, 47, 10, 0, 1).unwrap();
        // One slot per unit: the second caller in unit 7 gets unit 8 (and waits), the third
        // unit 9.
        let (next, a) = take_slot(&one, 0, 7, 0);
        let (next, b) = take_slot(&one, next, 7, 0);
        let (next, c) = take_slot(&one, next, 7, 1);
        assert_eq!((a, b, c), (7, 8, 9));
        // An idle while later, the counter starts at the clock again.
        let (_, d) = take_slot(&one, next, 100, 0);
        assert_eq!(d, 100);
        // Twitter's 4096 slots per unit: the 4097th caller of a unit waits for the next.
        let mut next = 0;
        for _ in 0..4096 {
            let (n, unit) = take_slot(&T, next, 5, 0);
            assert_eq!(unit, 5);
            next = n;
        }
        assert_eq!(take_slot(&T, next, 5, 0).1, 6);
    }

    #[test]
    fn abandoned_slots_and_backward_steps_pull_the_counter_back() {
        let one = Layout::custom(0, 1, 47, 10, 0, 1).unwrap();
        // Four callers took slots 8 to 11 at unit 7 and were cancelled: nobody waits now. The
        // next caller gets unit 8, not 12.
        let mut next = one.tick_at(7).0;
        for waiting in 0..5 {
            next = take_slot(&one, next, 7, waiting).0;
        }
        assert_eq!(one.units(Tick(next)), 12);
        assert_eq!(take_slot(&one, next, 7, 0).1, 8);
        // With two callers still waiting, it gets the slot after theirs.
        assert_eq!(take_slot(&one, next, 7, 2).1, 10);
        // The clock stepped back from unit 30,000 to 22,000: the counter follows it.
        let next = take_slot(&one, one.tick_at(30_000).0, 30_000, 0).0;
        assert_eq!(take_slot(&one, next, 22_000, 0).1, 22_001);
        // Twitter: past the current unit's 4096 slots, one per waiting caller.
        let far = T.tick_at(9).0;
        assert_eq!(take_slot(&T, far, 5, 0).1, 6);
        assert_eq!(take_slot(&T, far, 5, 4096).1, 7);
    }

    #[test]
    fn a_slot_beyond_what_the_waiting_callers_justify_is_stale() {
        let one = Layout::custom(0, 1, 47, 10, 0, 1).unwrap();
        assert!(!slot_is_stale(&one, 8, 7, 0));
        assert!(slot_is_stale(&one, 9, 7, 0));
        assert!(!slot_is_stale(&one, 9, 7, 1));
        // A clock stepped back 8 s under a slot of unit 30,001.
        assert!(slot_is_stale(&one, 30_001, 22_000, 3));
        assert!(!slot_is_stale(&T, 6, 5, 0));
        assert!(slot_is_stale(&T, 7, 5, 4095));
        assert!(!slot_is_stale(&T, 7, 5, 4096));
    }

    /// Callers that take a slot and give up on it a unit later (a `statement_timeout` of 1 ms
    /// in a loop), beside callers that want ids all the time, on a layout of one id per unit:
    /// the callers still get an id at least every few units. Without the pull back of
    /// `take_slot`, every abandoned slot pushed all later ones a unit further (four victims made
    /// 9 ids in 8 s).
    #[test]
    fn callers_that_abandon_their_slots_push_nobody_back() {
        let one = Layout::custom(0, 1, 47, 10, 0, 1).unwrap();
        let (abandoners, victims) = (4usize, 4usize);
        // (slot unit, since when it is held) per backend; abandoners first.
        let mut held: Vec<Option<(u64, u64)>> = vec![None; abandoners + victims];
        let mut pace = 0;
        let mut last_id = vec![1_000u64; victims];
        let mut longest = 0;
        for now in 1_000..5_000u64 {
            for k in 0..held.len() {
                if let Some((unit, since)) = held[k] {
                    if k < abandoners && now > since {
                        held[k] = None; // cancelled: gone without a word
                    } else if unit <= now {
                        held[k] = None;
                        let v = k - abandoners;
                        longest = longest.max(now - last_id[v]);
                        last_id[v] = now;
                        continue;
                    } else {
                        continue;
                    }
                }
                let waiting =
                    held.iter().filter(|h| h.is_some_and(|(unit, _)| unit > now)).count() as u64;
                let (p, unit) = take_slot(&one, pace, now, waiting);
                pace = p;
                held[k] = Some((unit, now));
            }
        }
        let backends = (abandoners + victims) as u64;
        assert!(
            longest <= 2 * backends,
            "a caller waited {longest} units between ids, beside {abandoners} that abandon slots"
        );
    }

    /// One simulated backend: bursters want ids all the time, callers one now and then.
    struct Backend {
        burster: bool,
        /// The time unit of the slot this backend holds, once it has asked for one.
        slot: Option<u64>,
        /// When it started waiting for the id it wants now.
        waiting_since: Option<u64>,
    }

    /// Backends under the advance rule and the slot rule, as the generator runs them, in steps
    /// of one clock unit (a burster takes up to five units' worth of ids per step while it is not
    /// paced). Returns how far ahead of the clock the ids got at worst (units), and the longest
    /// wait of a caller that takes one id every `every` units.
    fn simulate(l: Layout, bursters: usize, callers: usize, every: u64) -> (u64, u64) {
        let mut backends: Vec<Backend> = (0..bursters + callers)
            .map(|i| Backend { burster: i < bursters, slot: None, waiting_since: None })
            .collect();
        let (mut t, mut pace) = (l.tick_at(1_000), 0u64);
        let (mut deepest, mut longest_wait) = (0, 0);
        let mut x: u64 = 0x2545_f491_4f6c_dd1d; // xorshift: who goes first in each step
        for now in 1_000..4_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = backends.len();
            // How many others hold a slot ahead of the clock as each backend takes one.
            let mut waiting =
                backends.iter().filter(|b| b.slot.is_some_and(|unit| unit > now)).count() as u64;
            for k in 0..n {
                let b = &mut backends[(k + x as usize) % n];
                let wants = if b.burster {
                    5 * l.per_unit()
                } else if b.waiting_since.is_some() || now % every == (k as u64) % every {
                    1
                } else {
                    0
                };
                if wants == 0 {
                    continue;
                }
                if !b.burster {
                    b.waiting_since.get_or_insert(now);
                }
                for _ in 0..wants {
                    let next = match l.advance(t, now, DRIFT / 5) {
                        Advance::To(next) => next,
                        other => panic!("{l:?}, {bursters} bursters, unit {now}: {other:?}"),
                    };
                    if b.slot.is_none() && applies(&l, next, now, DRIFT / 5) {
                        let (p, unit) = take_slot(&l, pace, now, waiting);
                        pace = p;
                        b.slot = Some(unit);
                        waiting += u64::from(unit > now);
                    }
                    if b.slot.is_some_and(|unit| unit > now) {
                        break; // waits for its slot's unit
                    }
                    b.slot = None;
                    t = next;
                    deepest = deepest.max(l.units(t).saturating_sub(now));
                    if let Some(since) = b.waiting_since.take() {
                        longest_wait = longest_wait.max(now - since);
                        break;
                    }
                }
            }
        }
        (deepest, longest_wait)
    }

    /// Bursters and callers that take one id now and then, under every rate of ids per unit,
    /// from one per unit (`sequence_bits = 0`) to Twitter's 4096: the ids stay about halfway to
    /// max_drift, and no caller waits longer than one slot per waiting backend.
    #[test]
    fn bursts_alone_never_reach_the_drift_bound_and_callers_wait_their_turn() {
        let one_per_unit = Layout::custom(0, 1, 47, 10, 0, 1).unwrap();
        let four_per_unit = Layout::custom(0, 1, 47, 10, 2, 1).unwrap();
        for l in [TWITTER, SONYFLAKE, JS53, one_per_unit, four_per_unit] {
            for (bursters, callers) in [(1, 10), (6, 20), (50, 200)] {
                // The callers ask for at most a quarter of what the clock adds: they are not
                // the overload.
                let every = (4 * callers as u64 / l.per_unit()).max(50);
                let (deepest, longest_wait) = simulate(l, bursters, callers, every);
                let half = DRIFT / 10;
                // Each backend holds at most one slot: past halfway the ids run at most one
                // unit ahead per slot handed out and not yet used.
                let backends = (bursters + callers) as u64;
                let bound = half + backends.div_ceil(l.per_unit()) + 1;
                assert!(
                    deepest <= bound,
                    "{l:?}: {bursters} bursters drove the ids {deepest} units ahead (bound {bound})"
                );
                assert!(deepest >= half, "{l:?}: the bursts never reached the pacing point");
                let turn = backends.div_ceil(l.per_unit()) + 1;
                assert!(
                    longest_wait <= turn,
                    "{l:?}, {bursters} bursters: a caller waited {longest_wait} units (turn {turn})"
                );
            }
        }
    }
}
