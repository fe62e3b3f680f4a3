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
/// Pairs counted at once: past that, the pair counted longest ago is forgotten (its next line
/// is logged, without the count of what it skipped).
const PAIRS: usize = 64;

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

/// The count of each pair's lines.
#[derive(Clone, Copy)]
pub struct ClashLog {
    pairs: [Pair; PAIRS],
}

impl Default for ClashLog {
    fn default() -> Self {
        ClashLog { pairs: [Pair::default(); PAIRS] }
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
    // mutant: clash_rate
    pub fn admit(&mut self, a: i64, b: i64, now_ms: i64) -> Verdict {
        let (low, high) = (a.min(b), a.max(b));
        let used = |p: &Pair| p.window_start_ms != 0;
        let index = match self.pairs.iter().position(|p| used(p) && p.low == low && p.high == high)
        {
            Some(i) => i,
            None => {
                // A free slot, else the one whose minute began longest ago.
                let i = (0..PAIRS)
                    .min_by_key(|&i| {
                        let p = &self.pairs[i];
                        (used(p), p.window_start_ms)
                    })
                    .unwrap_or(0);
                self.pairs[i] = Pair { low, high, window_start_ms: 0, logged: 0, skipped: 0 };
                i
            }
        };
        let pair = &mut self.pairs[index];
        if pair.window_start_ms == 0 || now_ms - pair.window_start_ms >= WINDOW_MS {
            pair.window_start_ms = now_ms.max(1);
            pair.logged = 0;
        }
        if pair.logged < LINES_PER_MINUTE {
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

extension_sql_file! { "../../sql/clash_log.sql", name = "snowflake_clash_warning_due", requires = ["own_schema"] }

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
    fn past_the_table_the_oldest_pair_is_forgotten() {
        let mut log = ClashLog::default();
        for i in 0..PAIRS as i64 {
            for _ in 0..=LINES_PER_MINUTE {
                log.admit(0, i + 1, 1000 + i);
            }
        }
        // One more pair takes the slot of the pair whose minute began first (0, 1).
        assert_eq!(log.admit(0, 1000, 5000), Verdict::Log { skipped: 0 });
        assert_eq!(log.admit(0, 2, 5000), Verdict::Skip, "(0, 2) is still counted");
        assert_eq!(log.admit(0, 1, 5000), Verdict::Log { skipped: 0 }, "(0, 1) was forgotten");
        // However many pairs, each line takes one slot: the table never grows.
        for i in 0..10_000 {
            log.admit(i, -i - 1, 6000);
        }
    }
}
