//! How often the claims trigger (sql/claims_check.sql) may warn of one clash: at most
//! `LINES_PER_MINUTE` lines a minute for each pair of clusters, the rest counted and the count
//! given on the next line logged. In 0.5.0 a forging Citus node had the coordinator and another
//! worker log 111,133 and 111,574 WARNINGs in about 10 s (290 MB of log each): every forged
//! claim met every other one, and each meeting was a line.
//!
//! The count lives in shared memory, one table for the cluster: the lines come from whichever
//! process writes a claim (the claims worker, a logical replication apply worker, a caller of
//! `snowflake_claim()`), in any database. A server that does not preload pg_snowflake (a hub
//! that only collects claims) has no such table: there every clash is logged, as in 0.5.0.

use crate::privileges;
use pgrx::lwlock::PgLwLock;
use pgrx::prelude::*;
use pgrx::shmem::PGRXSharedMemory;
use std::sync::atomic::{AtomicBool, Ordering};

/// Lines a minute for each pair of clusters: the first few of a new clash show what it is, and
/// a flood says how big it is.
pub const LINES_PER_MINUTE: u32 = 3;
const WINDOW_MS: i64 = 60_000;
/// Pairs counted at once, each apart. A pair whose minute ended gives its slot to a new one;
/// while every slot's minute runs, a new pair is counted in one shared slot, `OVERFLOW`, with
/// its own lines a minute (0.6.0's review: evicting a running minute let 100 pairs log 19,200
/// lines in 12 s).
const PAIRS: usize = 64;
const OVERFLOW: usize = PAIRS;

#[derive(Clone, Copy, Default)]
struct Pair {
    low: i64,
    high: i64,
    /// Unix ms of the start of the pair's current minute; 0 for a slot not in use.
    window_start_ms: i64,
    logged: u32,
    /// Lines not logged since the last one that was.
    skipped: u64,
}

/// The count of each pair's lines, and of the pairs past the table (the last slot).
#[derive(Clone, Copy)]
pub struct ClashLog {
    pairs: [Pair; PAIRS + 1],
}

impl Default for ClashLog {
    fn default() -> Self {
        ClashLog { pairs: [Pair::default(); PAIRS + 1] }
    }
}

// SAFETY: plain integers, no pointers: valid at the same address in every process.
unsafe impl PGRXSharedMemory for ClashLog {}

/// Whether one more line of a clash is logged.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Logged; so many lines of this pair were left out since the last one logged.
    Log {
        skipped: u64,
    },
    Skip,
}

impl ClashLog {
    /// One more line of the clash between clusters `a` and `b` (either order) at `now_ms`.
    pub fn admit(&mut self, a: i64, b: i64, now_ms: i64) -> Verdict {
        let (low, high) = (a.min(b), a.max(b));
        // A minute that began in the future (a clock stepped back) has ended.
        let running = |p: &Pair| {
            p.window_start_ms != 0 && (0..WINDOW_MS).contains(&(now_ms - p.window_start_ms))
        };
        let found = self.pairs[..PAIRS]
            .iter()
            .position(|p| p.window_start_ms != 0 && p.low == low && p.high == high);
        let index = match found {
            Some(i) => i,
            // A slot whose minute ended (or never began), the longest ago first; else the
            // shared one.
            None => match (0..PAIRS)
                .filter(|&i| !running(&self.pairs[i]))
                .min_by_key(|&i| self.pairs[i].window_start_ms)
            {
                Some(i) => {
                    self.pairs[i] = Pair { low, high, window_start_ms: 0, logged: 0, skipped: 0 };
                    i
                }
                None => OVERFLOW,
            },
        };
        let pair = &mut self.pairs[index];
        if !running(pair) {
            pair.window_start_ms = now_ms.max(1);
            pair.logged = 0;
        }
        if mutant!(clash_rate, { pair.logged < LINES_PER_MINUTE }, { true }) {
            pair.logged += 1;
            Verdict::Log { skipped: std::mem::take(&mut pair.skipped) }
        } else {
            pair.skipped += 1;
            Verdict::Skip
        }
    }
}

static CLASH_LOG: PgLwLock<ClashLog> =
    // SAFETY: initialised by pg_shmem_init! in `init` before any process uses it.
    unsafe { PgLwLock::new(c"pg_snowflake clash log") };
/// Set in the postmaster while the library is preloaded (backends inherit it): only then is
/// there a `CLASH_LOG`.
static PRELOADED: AtomicBool = AtomicBool::new(false);

extension_sql_file! { "../../../sql/clash_log.sql", name = "snowflake_clash_warning_due", requires = ["own_schema"] }

/// Requests the table in shared memory. Only call from `_PG_init` while the library is
/// preloaded.
pub fn init() {
    pgrx::pg_shmem_init!(CLASH_LOG);
    PRELOADED.store(true, Ordering::Relaxed);
}

/// For the claims trigger: NULL when this warning of the clash between clusters `a` and `b`
/// is left out, else how many were left out since the last one logged (0 on a server that does
/// not preload pg_snowflake, which counts nothing). Superusers only, whatever is granted: any
/// caller could use up a pair's lines and hide a real clash from the log.
///
/// In the schema `snowflake` (sql/clash_log.sql declares it there), where only a superuser
/// creates functions: the trigger, which runs with the rights of whoever writes a claim, calls
/// it by that name.
#[pg_extern(volatile, strict, parallel_unsafe, sql = false)]
fn snowflake_clash_warning_due(a: i64, b: i64) -> Option<i64> {
    privileges::require_superuser("snowflake_clash_warning_due()");
    if !PRELOADED.load(Ordering::Relaxed) {
        return Some(0);
    }
    match CLASH_LOG.exclusive().admit(a, b, crate::clock::now_unix_ms()) {
        Verdict::Log { skipped } => Some(i64::try_from(skipped).unwrap_or(i64::MAX)),
        Verdict::Skip => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pair_logs_a_few_lines_a_minute_and_counts_the_rest() {
        let mut log = ClashLog::default();
        let t = 1_000_000;
        for _ in 0..LINES_PER_MINUTE {
            assert_eq!(log.admit(1, 2, t), Verdict::Log { skipped: 0 });
        }
        for i in 0..100 {
            assert_eq!(log.admit(2, 1, t + i), Verdict::Skip, "either order is one pair");
        }
        // Another pair is counted apart.
        assert_eq!(log.admit(1, 3, t), Verdict::Log { skipped: 0 });
        // A minute later the pair logs again, with the count of what it left out.
        assert_eq!(log.admit(1, 2, t + WINDOW_MS), Verdict::Log { skipped: 100 });
        assert_eq!(log.admit(1, 2, t + WINDOW_MS), Verdict::Log { skipped: 0 });
    }

    #[test]
    fn past_the_table_new_pairs_share_one_count_and_running_minutes_are_kept() {
        let mut log = ClashLog::default();
        for i in 0..PAIRS as i64 {
            for _ in 0..=LINES_PER_MINUTE {
                log.admit(0, i + 1, 1000 + i);
            }
        }
        // Every slot's minute runs: a hundred new pairs log three lines in all.
        let logged = (0..100).filter(|i| log.admit(10_000 + i, -1, 5000) != Verdict::Skip).count();
        assert_eq!(logged, LINES_PER_MINUTE as usize);
        assert_eq!(log.admit(0, 2, 5000), Verdict::Skip, "(0, 2) is still counted");
        // Once the first pair's minute ended, a new pair takes its slot.
        assert_eq!(log.admit(7, 8, 1000 + WINDOW_MS), Verdict::Log { skipped: 0 });
        assert_eq!(log.admit(7, 8, 1000 + WINDOW_MS), Verdict::Log { skipped: 0 });
    }

    #[test]
    fn a_minute_that_began_in_the_future_has_ended() {
        let mut log = ClashLog::default();
        for _ in 0..=LINES_PER_MINUTE {
            log.admit(1, 2, 100_000);
        }
        assert_eq!(log.admit(1, 2, 50_000), Verdict::Log { skipped: 1 }, "the clock stepped back");
    }
}
