//! Pacing: how borrowed time is kept for everyone.
//!
//! Past `max_drift` ahead of the clock every caller waits (and fails after `drift_wait`), so one
//! backend that bursts above the layout's rate could use up the borrowed time and make innocent
//! callers wait and fail. Pacing starts halfway: once the next id lies more than
//! `max_drift / 2` ahead of the clock, each backend may take at most `share` ids per clock time
//! unit, where `share` is the ids of one unit divided by the number of backends there can be.
//! All backends together then take at most the ids that the clock adds, so bursts alone can
//! never drive the ids much further than halfway: only a clock step can reach `max_drift`. A
//! burst is held to the layout's rate, a single-row caller almost never notices, and the other
//! half of `max_drift` stays free to absorb a clock that steps back.

use crate::layout::{Layout, Tick};
use pgrx::pg_sys;
use std::cell::Cell;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacer {
    /// The clock time unit in which this backend last took a paced id, and how many.
    unit: u64,
    taken: u64,
}

impl Pacer {
    pub const fn new() -> Pacer {
        Pacer { unit: 0, taken: 0 }
    }

    /// Whether `next` lies deep enough in borrowed time to be paced: one compare on the hot
    /// path.
    #[inline]
    pub const fn applies(layout: &Layout, next: Tick, now: u64, max_drift: u64) -> bool {
        layout.units(next) > now + max_drift / 2
    }

    /// The share of one backend: the ids of one time unit divided by the backends, at least 1.
    pub const fn share(per_unit: u64, backends: u32) -> u64 {
        let per = per_unit / if backends == 0 { 1 } else { backends as u64 };
        if per == 0 {
            1
        } else {
            per
        }
    }

    /// Counts a paced id taken at clock time unit `now`; `false` once this backend has used
    /// its share of that unit: it should then wait for the next one.
    pub fn take(&mut self, now: u64, share: u64) -> bool {
        if self.unit != now {
            self.unit = now;
            self.taken = 0;
        }
        if self.taken >= share {
            return false;
        }
        self.taken += 1;
        true
    }
}

thread_local! {
    /// This backend's count of paced ids.
    static PACER: Cell<Pacer> = const { Cell::new(Pacer::new()) };
}

/// Counts an id taken deep in borrowed time; `false` once this backend has used its share of
/// the clock's time unit `now`.
#[cold]
pub fn take(layout: &Layout, now: u64) -> bool {
    // SAFETY: a plain read of a global the postmaster sets before any backend starts.
    let backends = u32::try_from(unsafe { pg_sys::MaxBackends }).unwrap_or(u32::MAX);
    PACER.with(|p| {
        let mut pacer = p.get();
        let ok = pacer.take(now, Pacer::share(layout.per_unit(), backends));
        p.set(pacer);
        ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Advance, JS53, SONYFLAKE, TWITTER};

    const T: Layout = TWITTER;
    const DRIFT: u64 = 10_000;

    #[test]
    fn pacing_applies_past_half_of_max_drift() {
        assert!(!Pacer::applies(&T, T.tick_at(1_000), 1_000, 10_000));
        assert!(!Pacer::applies(&T, T.tick_at(6_000), 1_000, 10_000));
        assert!(Pacer::applies(&T, T.tick_at(6_001), 1_000, 10_000));
        // A zero bound paces every borrowed id (the drift bound then refuses them anyway).
        assert!(Pacer::applies(&T, T.tick_at(1_001), 1_000, 0));
    }

    #[test]
    fn the_shares_of_all_backends_add_up_to_at_most_one_unit_of_ids() {
        for per_unit in [1, 256, 512, 4096, 1 << 20] {
            for backends in [0, 1, 2, 7, 100, 4096, 5000, 262_143] {
                let share = Pacer::share(per_unit, backends);
                assert!(share >= 1);
                assert!(
                    backends.max(1) as u64 * share <= per_unit || share == 1,
                    "{backends} backends x {share}"
                );
            }
        }
        assert_eq!(Pacer::share(4096, 100), 40);
    }

    #[test]
    fn a_paced_backend_takes_its_share_then_waits_for_the_next_unit() {
        let mut p = Pacer::new();
        assert!((0..40).all(|_| p.take(7, 40)));
        assert!(!p.take(7, 40));
        assert!(p.take(8, 40));
    }

    /// Bursters that would take five units' worth of ids per clock unit each, and 90 callers
    /// that take one id now and then, under the advance rule with pacing, as the generator runs
    /// them: the ids never run further ahead than halfway to `max_drift`, plus the last unit
    /// taken, so no caller ever meets the drift bound while the clock moves forward.
    #[test]
    fn bursts_alone_never_reach_the_drift_bound() {
        const BACKENDS: u32 = 100;
        for l in [TWITTER, SONYFLAKE, JS53] {
            let share = Pacer::share(l.per_unit(), BACKENDS);
            for bursters in [1usize, 3, 10] {
                let mut pacers = vec![Pacer::new(); BACKENDS as usize];
                let mut asleep_until = vec![0u64; BACKENDS as usize];
                let mut t = l.tick_at(1_000);
                let mut deepest = 0;
                // 4000 units of clock in tenths of a unit.
                for step in 0..40_000u64 {
                    let now = 1_000 + step / 10;
                    for b in 0..BACKENDS as usize {
                        let wants = if b < bursters {
                            l.per_unit() / 2 // five units' worth per unit of clock
                        } else if (step + b as u64).is_multiple_of(997) {
                            1
                        } else {
                            0
                        };
                        for _ in 0..wants {
                            if asleep_until[b] > now {
                                break;
                            }
                            let next = match l.advance(t, now, DRIFT / 5) {
                                Advance::To(next) => next,
                                other => panic!("{bursters} bursters, step {step}: {other:?}"),
                            };
                            if Pacer::applies(&l, next, now, DRIFT / 5)
                                && !pacers[b].take(now, share)
                            {
                                asleep_until[b] = now + 1;
                                break;
                            }
                            t = next;
                            deepest = deepest.max(l.units(t) - now.min(l.units(t)));
                        }
                    }
                }
                assert!(
                    deepest <= DRIFT / 10 + 1,
                    "{l:?}: {bursters} bursters drove the ids {deepest} units ahead"
                );
                assert!(
                    deepest >= DRIFT / 10,
                    "the bursts never reached the pacing point"
                );
            }
        }
    }
}
